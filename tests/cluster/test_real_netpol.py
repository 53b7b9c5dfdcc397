"""The NetworkPolicies trainmaster renders, enforced by kube-router on the real nodes
(issue 37; trainmaster/cluster/_kube_router.py).

One stack: stacks/dev as `netpol` on two real nodes, dp-example (examples/data-parallel)
training there under the operator and trainmaster-scheduler, which run as pods there too.
Every connection is made from inside a pod (an exec), with a 2 s timeout:

- `outsider`, a busybox pod in a namespace of its own on each real node, is refused at a
  rank's rendezvous port (MASTER_PORT) and metrics port, and at the operator's and the
  scheduler's metrics ports;
- each of those ports is shown open to whom the policies admit it, so a refusal is the
  policy and not a closed port: rank 1 reaches rank 0's rendezvous port (a listener the
  test opens there on MASTER_PORT: the example closes its own once the gang has formed);
  `scraper`, a busybox pod in the scrape namespace (`monitoring`, where the stack's
  Prometheus would run; the monitoring stack itself is not started here) reaches every
  metrics port and is refused at the rendezvous port;
- a rank still reaches the API server (the `kubernetes` Service), resolves names with the
  cluster's DNS and reaches an S3 server (versitygw, a host process on node 0's bridge
  address) by its Service's name; the outsider's DNS works too, and the job trains on;
- `cluster down` leaves no kube-router chain, ipset, lock or process behind.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.stream import stream

from tests.cluster.realkit import dev_stack, log
from trainmaster.cluster import _kube_router
from trainmaster.cluster._node_images import BUSYBOX_IMAGE
from trainmaster.drill import (
    S3_PORT,
    RealStack,
    job_status,
    s3_endpoint,
    serve_s3_dataset,
    wait_training,
)
from trainmaster.kubeclient import SyncKube, api_path, generated_client, pod_path
from trainmaster.launch import METRICS_PORT
from trainmaster.objects._job_env import MASTER_PORT
from trainmaster.objects._operator import OPERATOR_METRICS_PORT
from trainmaster.objects._scheduler import METRICS_PORT as SCHEDULER_METRICS_PORT
from trainmaster.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

OUTSIDER_NS = "netpol-outsider"
S3_SERVICE = "netpol-s3"


def _exec(api: client.CoreV1Api, ns: str, pod: str, argv: list[str]) -> str:
    out: str = stream(api.connect_get_namespaced_pod_exec, pod, ns, command=argv,
                      stderr=True, stdin=False, stdout=True, tty=False,
                      _request_timeout=30)
    return out


def _nc(api: client.CoreV1Api, ns: str, pod: str, ip: str, port: int) -> bool:
    """Whether busybox's nc in `pod` opens a TCP connection to ip:port within 2 s."""
    out = _exec(api, ns, pod, ["sh", "-c", f"nc -w 2 {ip} {port} </dev/null >/dev/null "
                               "2>&1 && echo OPEN || echo REFUSED"])
    return out.strip().endswith("OPEN")


def _py_connect(api: client.CoreV1Api, ns: str, pod: str, host: str, port: int) -> bool:
    """Whether python in a rank's container opens a TCP connection to host:port in 2 s."""
    code = ("import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])),"
            " 2).close(); print('OPEN')\nexcept OSError as e: print('REFUSED', e)")
    out = _exec(api, ns, pod, ["python", "-c", code, host, str(port)])
    return out.strip().endswith("OPEN")


def _busybox(name: str, ns: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "nodeName": node, "tolerations": [{"operator": "Exists"}],
            "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}],
        },
    }


def _ip(kube: SyncKube, ns: str, name: str) -> str:
    ip: str = kube.get(pod_path(ns, name))["status"]["podIP"]
    return ip


@pytest.fixture(scope="module")
def stack(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RealStack]:
    with dev_stack("netpol", 2, tmp_path_factory.mktemp("netpol")) as real:
        yield real
    # `cluster down` ran: kube-router's rules, sets, lock and process are gone.
    assert _kube_router.leftovers() == []
    assert not _kube_router.LOCK.exists()
    assert _kube_router.holder() is None
    left = subprocess.run(["pgrep", "-f", str(real.state_dir / "kube-router")],
                          capture_output=True, text=True).stdout
    assert left == ""


def test_rendered_policies_are_enforced_on_the_real_nodes(stack: RealStack) -> None:
    assert _kube_router.enforcing(stack.state_dir), "another cluster of this host enforces"
    api = client.CoreV1Api(generated_client(stack.kubeconfig))
    ns, system = stack.namespace, f"{stack.namespace}-system"
    scrape_ns = stack.spec.monitoring.scrape_namespace
    nodes = stack.record.real_nodes
    with SyncKube.connect(stack.kubeconfig) as kube:
        attempt, ranks = wait_training(stack, kube, log)
        # What trainmaster rendered is what kube-router enforces: the namespace's deny, and
        # the job's policy, which the operator makes with the gang.
        policies = {p["metadata"]["name"] for p in kube.list(
            api_path("networking.k8s.io/v1", "networkpolicies", ns))}
        assert {"deny-ingress", f"{stack.job.name}-rendezvous"} <= policies, policies
        ranks = sorted(ranks, key=lambda p: p["metadata"]["name"])
        assert {p["spec"]["nodeName"] for p in ranks} == set(nodes)
        rank0, rank1 = ranks[0]["metadata"]["name"], ranks[1]["metadata"]["name"]
        system_pods = kube.list(pod_path(system))
        operator = next(p for p in system_pods if p["metadata"]["name"].startswith(
            f"{stack.spec.metadata.name}-operator-"))
        scheduler = next(p for p in system_pods if p["metadata"]["name"].startswith(
            f"{stack.spec.scheduler.name}-"))
        for name in (OUTSIDER_NS, scrape_ns):
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        probes = [(OUTSIDER_NS, f"outsider-{i}", node) for i, node in enumerate(nodes)]
        probes.append((scrape_ns, "scraper", nodes[1]))
        for pns, name, node in probes:
            kube.apply(_busybox(name, pns, node))
        s3 = serve_s3_dataset(stack.record, ns, S3_SERVICE, f"{S3_SERVICE}-keys", "netpol",
                              {"probe": b"x"})
        assert s3 is not None

        def running() -> bool:
            return all((kube.get(pod_path(p, n)).get("status") or {}).get("phase")
                       == "Running" for p, n, _ in probes)
        wait_until(running, "the probe pods to run", 60)
        rank0_ip = _ip(kube, ns, rank0)
        rank1_ip = _ip(kube, ns, rank1)
        operator_ip, scheduler_ip = operator["status"]["podIP"], scheduler["status"]["podIP"]
        checkpoint = int((job_status(kube, ns, stack.job.name).get("lastCheckpoint")
                          or {}).get("step") or 0)

    # A listener on rank 0's rendezvous port (MASTER_PORT), for the probes below.
    listener = ("import socket,sys,time\ns=socket.create_server(('0.0.0.0',int(sys.argv[1])))\n"
                "s.settimeout(1)\nend=time.time()+40\nwhile time.time()<end:\n"
                " try: s.accept()[0].close()\n except OSError: pass")
    opened = stream(api.connect_get_namespaced_pod_exec, rank0, ns,
                    command=["python", "-c", listener, str(MASTER_PORT)], stderr=True, stdin=False,
                    stdout=True, tty=False, _preload_content=False)
    try:
        wait_until(lambda: _py_connect(api, ns, rank1, rank0_ip, MASTER_PORT),
                   "rank 1 to reach rank 0's rendezvous port", 20)
        refused = {
            (name, target): _nc(api, OUTSIDER_NS, name, ip, port)
            for _, name, _ in probes[:-1]
            for target, ip, port in [
                ("rank 0 rendezvous", rank0_ip, MASTER_PORT),
                ("rank 0 metrics", rank0_ip, METRICS_PORT),
                ("rank 1 metrics", rank1_ip, METRICS_PORT),
                ("operator metrics", operator_ip, OPERATOR_METRICS_PORT),
                ("scheduler metrics", scheduler_ip, SCHEDULER_METRICS_PORT),
            ]
        }
        scraper_rendezvous = _nc(api, scrape_ns, "scraper", rank0_ip, MASTER_PORT)
    finally:
        opened.close()
    assert [k for k, opened_ in refused.items() if opened_] == []
    assert not scraper_rendezvous, "the scrape namespace reached the rendezvous port"

    # Every metrics port is open to the scrape namespace (so the refusals above are policy).
    for target, ip, port in [(rank0, rank0_ip, METRICS_PORT), (rank1, rank1_ip, METRICS_PORT),
                             ("operator", operator_ip, OPERATOR_METRICS_PORT),
                             ("scheduler", scheduler_ip, SCHEDULER_METRICS_PORT)]:
        assert _nc(api, scrape_ns, "scraper", ip, port), f"scraper -> {target}:{port}"

    # What pods need from the host still gets through: the API server, DNS, the S3 server.
    assert _py_connect(api, ns, rank1, "kubernetes.default.svc.cluster.local", 443)
    assert _py_connect(api, ns, rank1, f"{S3_SERVICE}.{ns}.svc.cluster.local", S3_PORT), \
        s3_endpoint(S3_SERVICE, ns)
    dns = _exec(api, OUTSIDER_NS, "outsider-0",
                ["nslookup", "kubernetes.default.svc.cluster.local"])
    assert "10.0.0.1" in dns, dns

    # And the gang trains on, in the same attempt, to a newer checkpoint.
    with SyncKube.connect(stack.kubeconfig) as kube:
        again, _ = wait_training(stack, kube, log, after_checkpoint=checkpoint)
    assert again == attempt
