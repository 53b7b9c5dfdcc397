module trainmaster.local/tools/network-crds

go 1.26.0

// Nothing is compiled: the family copies CRD files out of these modules (see _recipes.py).
require (
	github.com/k8snetworkplumbingwg/network-attachment-definition-client v1.7.6
	github.com/k8snetworkplumbingwg/whereabouts v0.9.2
)
