//go:build tools

// Package tools pins CoreDNS, the cluster DNS of trainmaster's real local nodes. The binary is
// built from our own main package in cmd/coredns, which imports only the plugins it needs.
package tools

import _ "github.com/coredns/coredns/coremain"
