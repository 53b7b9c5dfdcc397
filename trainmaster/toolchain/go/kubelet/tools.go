//go:build tools

// Package tools pins the kubelet of trainmaster's real local nodes: the same k8s.io/kubernetes
// release and dependency pins as the control plane (go/k8s), in a family of its own so that
// adding it leaves the cached control-plane build valid; the Go build cache shares packages.
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
