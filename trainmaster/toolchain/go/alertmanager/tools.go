//go:build tools

// Package tools pins Alertmanager, which receives the real-node cluster's alerts.
package tools

import _ "github.com/prometheus/alertmanager/cmd/alertmanager"
