//go:build tools

// Package tools pins the Pulumi engine (CLI) that runs trainmaster's Python programs.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
