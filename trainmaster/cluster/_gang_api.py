"""The upstream gang API (``scheduling.k8s.io/v1beta1`` Workload and PodGroup, a pod's
``spec.schedulingGroup``) is beta in Kubernetes 1.37 and off by default; a PodGroup's
``schedulingConstraints.topology`` is behind a second, alpha gate, and composite groups
(a Workload's ``compositePodGroupTemplates``, a PodGroup's ``parentCompositePodGroupName``,
the ``v1alpha3`` ``CompositePodGroup``) behind a third. Every gate must be on in every
component that reads or validates those fields: with a gate off, the API server drops the
field from the object without a word."""

from __future__ import annotations

FEATURE_GATES = ("--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,"
                 "CompositePodGroup=true")
"""For kube-apiserver, kube-controller-manager and kube-scheduler alike."""

RUNTIME_CONFIG = "--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"
"""kube-apiserver only: beta and alpha API versions are not served unless asked for. The
alpha version serves ``CompositePodGroup``, which kube-scheduler watches once the
``CompositePodGroup`` gate is on (it would wait for that watch forever without it)."""
