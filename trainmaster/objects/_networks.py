"""The compute and storage networks: Multus attachments, the RDMA device plugin config,
and what a training pod needs to use them (annotation and NCCL environment)."""

from __future__ import annotations

import json
from typing import Any

from trainmaster.api import (
    APP_INSTANCE_LABEL,
    APP_NAME_LABEL,
    RAIL_SUBNETS_ENV,
    RDMA_PREFIX,
    app_labels,
)
from trainmaster.spec import ClusterSpec

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"


def rail_names(spec: ClusterSpec) -> list[str]:
    return [rail.name or f"rail{i}" for i, rail in enumerate(spec.networks.compute.rails)]


def rail_devices(spec: ClusterSpec) -> list[str]:
    return [rail.device or f"mlx5_{i}" for i, rail in enumerate(spec.networks.compute.rails)]


def rdma_resources(spec: ClusterSpec) -> list[str]:
    """Extended resource names, one per compute rail: rdma/<rail>."""
    return [f"{RDMA_PREFIX}{name}" for name in rail_names(spec)]


def attachment_name(spec: ClusterSpec, network: str) -> str:
    return f"{spec.metadata.name}-{network}"


def _ipam(subnet: str) -> dict[str, Any]:
    return {"type": "whereabouts", "range": subnet}


def _rail_config(spec: ClusterSpec, index: int) -> dict[str, Any]:
    compute = spec.networks.compute
    rail = compute.rails[index]
    device = rail_devices(spec)[index]
    name = attachment_name(spec, rail_names(spec)[index])
    if compute.fabric == "infiniband":
        # IPoIB child interface on the rail's HCA port; RDMA goes over the HCA itself.
        plugin: dict[str, Any] = {"type": "ipoib", "master": f"ib{index}", "mtu": compute.mtu}
    else:
        # RoCE: a macvlan on the rail's netdev; the shared RDMA device plugin exposes the HCA.
        plugin = {"type": "macvlan", "master": device, "mode": "bridge", "mtu": compute.mtu}
    plugin["ipam"] = _ipam(rail.subnet)
    return {"cniVersion": "0.3.1", "name": name, "plugins": [plugin]}


def _attachment(
    spec: ClusterSpec, network: str, config: dict[str, Any], resource: str | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": attachment_name(spec, network),
        "namespace": spec.metadata.namespace,
        "labels": app_labels("network", "networks", spec.metadata.name),
    }
    # No empty map: the API server drops it, and Pulumi would then see a diff on every up.
    if resource:
        metadata["annotations"] = {"k8s.v1.cni.cncf.io/resourceName": resource}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": metadata,
        "spec": {"config": json.dumps(config, sort_keys=True)},
    }


def build_network_attachments(spec: ClusterSpec) -> list[dict[str, Any]]:
    """One attachment per compute rail, plus one for the storage network."""
    out = [
        _attachment(spec, name, _rail_config(spec, i), resource)
        for i, (name, resource) in enumerate(
            zip(rail_names(spec), rdma_resources(spec), strict=True)
        )
    ]
    storage = spec.networks.storage
    if storage is not None:
        config = {
            "cniVersion": "0.3.1",
            "name": attachment_name(spec, "storage"),
            "plugins": [
                {
                    "type": "macvlan",
                    "master": storage.interface,
                    "mode": "bridge",
                    "mtu": storage.mtu,
                    "ipam": _ipam(storage.subnet),
                }
            ],
        }
        out.append(_attachment(spec, "storage", config, None))
    return out


def build_rdma_device_plugin_config(spec: ClusterSpec) -> dict[str, Any]:
    """Config of the k8s-rdma-shared-dev-plugin: one shared resource per rail's HCA."""
    config = {
        "periodicUpdateInterval": 300,
        "configList": [
            {
                "resourceName": name,
                "resourcePrefix": "rdma",
                "rdmaHcaMax": 1000,
                "selectors": {
                    "ifNames" if spec.networks.compute.fabric == "roce" else "deviceIDs": [device]
                },
            }
            for name, device in zip(rail_names(spec), rail_devices(spec), strict=True)
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{spec.metadata.name}-rdma-devices",
            "namespace": spec.metadata.namespace,
            "labels": app_labels("rdma-shared-device-plugin", "networks", spec.metadata.name),
        },
        "data": {"config.json": json.dumps(config, indent=2, sort_keys=True)},
    }


def build_rdma_device_plugin(spec: ClusterSpec) -> dict[str, Any]:
    """The device plugin DaemonSet (privileged: it manages host RDMA devices)."""
    labels = app_labels("rdma-shared-device-plugin", "networks", spec.metadata.name)
    selector = {
        APP_NAME_LABEL: labels[APP_NAME_LABEL],
        APP_INSTANCE_LABEL: spec.metadata.name,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"{spec.metadata.name}-rdma-device-plugin",
            "namespace": spec.metadata.namespace,
            "labels": labels,
        },
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Registers host devices with the kubelet; never calls the API.
                    "automountServiceAccountToken": False,
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [
                        {
                            "name": "rdma-shared-dp",
                            "image": "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2",
                            "securityContext": {"privileged": True},
                            "volumeMounts": [
                                {
                                    "name": "device-plugin",
                                    "mountPath": "/var/lib/kubelet/device-plugins",
                                },
                                {"name": "config", "mountPath": "/k8s-rdma-shared-dev-plugin"},
                                {"name": "devs", "mountPath": "/dev/"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "device-plugin",
                            "hostPath": {"path": "/var/lib/kubelet/device-plugins"},
                        },
                        {
                            "name": "config",
                            "configMap": {
                                "name": f"{spec.metadata.name}-rdma-devices",
                                "items": [{"key": "config.json", "path": "config.json"}],
                            },
                        },
                        {"name": "devs", "hostPath": {"path": "/dev/"}},
                    ],
                },
            },
        },
    }


def pod_network_annotation(spec: ClusterSpec) -> str:
    """Multus annotation that attaches a training pod to every rail and to storage."""
    ns = spec.metadata.namespace
    nets = [
        f"{ns}/{attachment_name(spec, name)}@net{i + 1}" for i, name in enumerate(rail_names(spec))
    ]
    if spec.networks.storage is not None:
        nets.append(f"{ns}/{attachment_name(spec, 'storage')}@storage0")
    return ",".join(nets)


def storage_network_annotation(spec: ClusterSpec) -> str | None:
    """Multus annotation that attaches a dataset warm-up pod to the storage network only
    (it reads the dataset's source, which the storage network serves); None without one."""
    if spec.networks.storage is None:
        return None
    return f"{spec.metadata.namespace}/{attachment_name(spec, 'storage')}@storage0"


def nccl_env(spec: ClusterSpec) -> dict[str, str]:
    """NCCL settings derived from the fabric: nobody writes these by hand in the spec."""
    compute = spec.networks.compute
    env = {
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_HCA": ",".join(rail_devices(spec)),
        # Bootstrap and out-of-band traffic over the pod's primary interface.
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_CROSS_NIC": "0",
        "NCCL_NET_GDR_LEVEL": "PHB",
        # For `trainmaster launch` to find the pod's rail interfaces by their addresses
        # (trainmaster.launch._rails), whatever Multus or the node named them.
        RAIL_SUBNETS_ENV: ",".join(r.subnet for r in compute.rails),
    }
    if compute.fabric == "roce" and compute.lossless is not None:
        env["NCCL_IB_GID_INDEX"] = str(compute.lossless.gid_index)
        env["NCCL_IB_TC"] = str(compute.lossless.traffic_class)
    return env


def build_networks(spec: ClusterSpec) -> list[dict[str, Any]]:
    return [
        *build_network_attachments(spec),
        build_rdma_device_plugin_config(spec),
        build_rdma_device_plugin(spec),
    ]
