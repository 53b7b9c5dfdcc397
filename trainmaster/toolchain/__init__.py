"""Pinned Go binaries (control plane, kwok, Pulumi) built from Go modules into a cache."""

from trainmaster.toolchain._about import ABOUT, About
from trainmaster.toolchain._build import (
    BUILD_JOBS,
    BuildResult,
    ToolchainError,
    build,
    cache_root,
    family_dir,
    is_built,
    tool_path,
)
from trainmaster.toolchain._recipes import (
    ALERTMANAGER_VERSION,
    CLUSTER_FAMILIES,
    CONTAINERD_VERSION,
    K8S_VERSION,
    MONITORING_FAMILIES,
    MONITORING_STACK_FAMILIES,
    NODE_FAMILIES,
    POLICY_FAMILIES,
    PROMETHEUS_OPERATOR_CRDS,
    PROMETHEUS_OPERATOR_VERSION,
    PULUMI_FAMILIES,
    RECIPES,
    WORKLOAD_API_FAMILIES,
    Recipe,
)
from trainmaster.toolchain._upstream import SOURCES_ENV, read_source

__all__ = [
    "ABOUT",
    "ALERTMANAGER_VERSION",
    "BUILD_JOBS",
    "CLUSTER_FAMILIES",
    "CONTAINERD_VERSION",
    "K8S_VERSION",
    "MONITORING_FAMILIES",
    "MONITORING_STACK_FAMILIES",
    "NODE_FAMILIES",
    "POLICY_FAMILIES",
    "PROMETHEUS_OPERATOR_CRDS",
    "PROMETHEUS_OPERATOR_VERSION",
    "PULUMI_FAMILIES",
    "RECIPES",
    "SOURCES_ENV",
    "WORKLOAD_API_FAMILIES",
    "About",
    "BuildResult",
    "Recipe",
    "ToolchainError",
    "build",
    "cache_root",
    "family_dir",
    "is_built",
    "read_source",
    "tool_path",
]
