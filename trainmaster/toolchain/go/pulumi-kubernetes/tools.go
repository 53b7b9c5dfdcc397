//go:build tools

// Package tools pins the Kubernetes resource provider of Pulumi. Its upstream main package
// embeds generated files that its module zip lacks, so the binary is built from our own main
// package in cmd/pulumi-resource-kubernetes, which imports the provider (pinned here).
package tools

import _ "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
