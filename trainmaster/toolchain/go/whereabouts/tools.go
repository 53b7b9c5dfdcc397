//go:build tools

// Package tools pins whereabouts, the IPAM plugin that gives the real local nodes' pods their
// addresses on the rails and the storage network (the rendered NADs' `ipam.type: whereabouts`),
// and the network-attachment-definition client whose module holds the NetworkAttachmentDefinition
// CRD of the Network Plumbing Working Group (the one Multus installs).
package tools

import (
	_ "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	_ "github.com/k8snetworkplumbingwg/whereabouts/cmd"
)
