//go:build tools

// Package tools pins the etcd server that backs trainmaster's local control plane.
package tools

import _ "go.etcd.io/etcd/server/v3"
