// Command coredns is CoreDNS with only the plugins the local cluster's DNS needs, so that the
// build skips the cloud-provider SDKs of the stock binary. Plugin order comes from CoreDNS's own
// directive list (core/dnsserver), as in any custom CoreDNS build.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
