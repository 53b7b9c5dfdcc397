//go:build tools

// Package tools pins the Prometheus server that scrapes the real-node cluster.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
