"""An S3 dataset source for a local cluster's real nodes: versitygw (trainmaster.s3server)
attached to the cluster, listening on the host's address on the storage network (the
storage bridge, trainmaster.cluster.storage_server_address), so the warm-ups' reads travel
over the pods' `storage0`; with no storage network in the spec, on the first real node's
bridge address (the host side of the pods' network). Either way every real node's pods
reach it and nothing outside this host does. A bucket filled with the dataset, and in the
stack's namespace:

- a headless Service `<service>` with an EndpointSlice on that address, so pods reach the
  server as `http://<service>.<namespace>.svc.cluster.local:<port>` through the cluster's
  DNS (CoreDNS serves headless Services from the API), whatever network slot the cluster got;
- the Secret `<secret>` with the server's keys, as `cache.datasets[].credentialsSecret`
  names it (keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).

`trainmaster cluster down` stops the server with the cluster and removes its data.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from trainmaster.api import APP_COMPONENT_LABEL, APP_MANAGED_BY_LABEL, APP_PART_OF_LABEL
from trainmaster.cluster import ClusterError, ClusterRecord, dns_ip, storage_server_address
from trainmaster.kubeclient import SyncKube
from trainmaster.s3server import S3Server, start_for_cluster
from trainmaster.spec import CheckpointMirror, ClusterSpec, Dataset, Job, load_spec
from trainmaster.toolchain import build, is_built

S3_PORT = 7070
_MANAGED = {APP_MANAGED_BY_LABEL: "trainmaster-local-cluster"}


def s3_endpoint(service: str, namespace: str, port: int = S3_PORT) -> str:
    return f"http://{service}.{namespace}.svc.cluster.local:{port}"


def serve_s3_dataset(record: ClusterRecord, namespace: str, service: str, secret: str,
                     bucket: str, objects: Mapping[str, bytes], port: int = S3_PORT,
                     empty_buckets: Collection[str] = ()) -> S3Server:
    """Start the server for the cluster's real nodes, fill `bucket`, create
    `empty_buckets`, and publish the Service, its EndpointSlice and the credentials Secret
    in `namespace`: last, so a pod that needs the Secret starts once the buckets exist."""
    if record.net_slot is None or not record.real_nodes:
        raise ClusterError(f"cluster {record.name} has no real nodes whose pods could reach "
                           "an S3 server on this host")
    address = (storage_server_address(load_spec(Path(record.spec)), record.net_slot)
               or dns_ip(record.net_slot))  # else node 0's bridge: the host, as pods see it
    server = start_for_cluster(Path(record.state_dir), address, port)
    server.seed(bucket, objects)
    for empty in empty_buckets:
        server.seed(empty, {})
    labels = {**_MANAGED, APP_PART_OF_LABEL: record.name,
              APP_COMPONENT_LABEL: "dataset-source"}
    with SyncKube.connect(Path(record.kubeconfig)) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": namespace, "labels": _MANAGED}})
        kube.apply({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": namespace, "labels": labels},
            "spec": {"clusterIP": "None",
                     "ports": [{"name": "s3", "port": port, "protocol": "TCP"}]},
        })
        kube.apply({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service}-host", "namespace": namespace,
                         "labels": {**labels, "kubernetes.io/service-name": service,
                                    "endpointslice.kubernetes.io/managed-by":
                                        "trainmaster-local-cluster"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "s3", "port": port, "protocol": "TCP"}],
        })
        kube.apply({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret, "namespace": namespace, "labels": labels},
            "stringData": {"AWS_ACCESS_KEY_ID": server.access_key,
                           "AWS_SECRET_ACCESS_KEY": server.secret_key},
        })
    return server


_WORDS = ("once", "upon", "a", "time", "there", "was", "little", "fox", "who", "liked",
          "to", "read", "big", "books", "under", "the", "old", "tree", "and", "one", "day",
          "she", "found", "map", "that", "led", "far", "away", "home")


def story_shards(shards: int = 8, size: int = 64 << 10, seed: int = 7) -> list[bytes]:
    """Small made-up stories (a stand-in for TinyStories, which cannot be fetched here)."""
    rng = random.Random(seed)
    out = []
    for _ in range(shards):
        text: list[str] = []
        length = 0
        while length < size:
            line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 24))) + ".\n"
            text.append(line.capitalize())
            length += len(line)
        out.append("".join(text).encode())
    return out


def served_here(spec: ClusterSpec) -> list[Dataset]:
    """The stack's s3:// datasets with a credentials Secret and an endpoint that is a
    Service of its own namespace: those a local cluster's S3 server can stand in for."""
    ns = spec.metadata.namespace
    return [d for d in (spec.cache.datasets if spec.cache else [])
            if d.source.startswith("s3://") and d.endpoint and d.credentials_secret
            and (urlsplit(d.endpoint).hostname or "").endswith(f".{ns}.svc.cluster.local")]


def served_mirror(spec: ClusterSpec, job: Job) -> CheckpointMirror | None:
    """The job's checkpoint mirror (jobs[].checkpoint.mirror) when the demo's S3 server
    holds its bucket: it names that server's endpoint and credentials Secret (those of the
    first dataset `served_here`)."""
    mirror = job.checkpoint.mirror if job.checkpoint is not None else None
    wanted = served_here(spec)
    if (mirror is None or not wanted or mirror.endpoint != wanted[0].endpoint
            or mirror.credentials_secret != wanted[0].credentials_secret):
        return None
    return mirror


def mirror_buckets(spec: ClusterSpec) -> list[str]:
    """The buckets of the jobs' mirrors the demo's S3 server holds (`served_mirror`)."""
    found: list[str] = []
    for job in spec.jobs:
        mirror = served_mirror(spec, job)
        if mirror is not None and (bucket := urlsplit(mirror.url).netloc) not in found:
            found.append(bucket)
    return found


def serve_demo_datasets(record: ClusterRecord, spec: ClusterSpec,
                        report: Callable[[str], None]) -> S3Server | None:
    """Serve every s3:// dataset of the stack whose endpoint is an in-cluster Service
    name (`s3_endpoint`) from one server on the storage network, with made-up shards
    and the Secret it names: the dev stack's `tinystories`, so its warm-up really copies
    from an S3 server; and the buckets of the jobs' checkpoint mirrors on the same
    endpoint (`mirror_buckets`). None when the stack has no such dataset."""
    ns = spec.metadata.namespace
    wanted = served_here(spec)
    if not wanted:
        return None
    if not is_built("versitygw"):
        report("building versitygw, the demo's S3 server (once, cached by its pin)")
        build(["versitygw"])
    first = urlsplit(wanted[0].endpoint or "")
    service, port = (first.hostname or "").split(".")[0], first.port or 80
    secret = wanted[0].credentials_secret or ""
    buckets = mirror_buckets(spec)
    server: S3Server | None = None
    for dataset in wanted:
        parts = urlsplit(dataset.source)
        prefix = parts.path.strip("/")
        objects = {f"{prefix}/shard-{i:03d}.txt" if prefix else f"shard-{i:03d}.txt": data
                   for i, data in enumerate(story_shards())}
        report(f"S3 server for dataset {dataset.name}: {dataset.source} "
               f"({len(objects)} objects) at {dataset.endpoint}")
        if server is None:
            for bucket in buckets:
                report(f"S3 server for the jobs' checkpoint mirrors: bucket {bucket} "
                       f"at {dataset.endpoint}")
            server = serve_s3_dataset(record, ns, service, secret, parts.netloc, objects,
                                      port, empty_buckets=buckets)
        else:
            server.seed(parts.netloc, objects)
    return server


__all__ = ["S3_PORT", "mirror_buckets", "s3_endpoint", "serve_demo_datasets",
           "serve_s3_dataset", "served_here", "served_mirror", "story_shards"]
