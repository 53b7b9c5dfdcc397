//go:build tools

// Package tools pins versitygw (Apache-2.0), the S3-compatible server the dataset-cache
// tests and the demo serve datasets from, with its posix backend (a folder per bucket).
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
