"""Pulumi components that apply a trainmaster cluster spec."""

from components._component import ObjectsComponent
from components._object import KubernetesObject, logical_name, type_token
from components.cluster import PART_TOKENS, TrainingCluster, TrainingClusterArgs

__all__ = [
    "PART_TOKENS",
    "KubernetesObject",
    "ObjectsComponent",
    "TrainingCluster",
    "TrainingClusterArgs",
    "logical_name",
    "type_token",
]
