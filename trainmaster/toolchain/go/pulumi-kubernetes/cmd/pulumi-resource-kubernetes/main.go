// Command pulumi-resource-kubernetes is Pulumi's Kubernetes resource provider, built from the
// pinned github.com/pulumi/pulumi-kubernetes/provider/v4 module.
//
// Upstream's main package (provider/cmd/pulumi-resource-kubernetes) embeds schema-embed.json
// and terraform-mapping-embed.json, which its release build generates with the module's own
// generate.go and which the module zip therefore lacks. trainmaster's build copies that
// generate.go with schema.json and terraform-mapping.json from the module into this folder and
// runs it (see the "pulumi-kubernetes" recipe) before compiling this package, which then serves
// the provider exactly as upstream's main does.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

var providerName = "kubernetes"

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve(providerName, version.Version, pulumiSchema, terraformMapping)
}
