//go:build tools

// Package tools pins Pulumi's Python language host. Its own module
// (sdk/python/cmd/pulumi-language-python/v3) is refused by the Go module proxy, but the
// sdk/v3 module still holds the package up to v3.79.0; `go install pkg@v3.79.0` refuses
// sdk/v3 because its go.mod has replace directives, hence this wrapper module.
package tools

import _ "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
