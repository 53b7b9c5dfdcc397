//go:build tools

// Package tools pins the container runtime of trainmaster's real local nodes: containerd, its
// runc shim and the ctr client (used to import locally built images).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
