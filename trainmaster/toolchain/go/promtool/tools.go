//go:build tools

// Package tools pins Prometheus's promtool, which unit-tests trainmaster's alert rules.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
