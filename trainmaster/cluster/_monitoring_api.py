"""Read the live Prometheus and Alertmanager of `cluster up --monitoring` from this host.

Their pods run on the real nodes, whose bridges this host routes to: their pod IPs are
reachable from here (as the launcher's metrics are in tests/cluster/test_real_node_features),
and nothing else is (no kube-proxy, no NodePort). Only their HTTP APIs are used.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmaster.cluster._monitoring import ALERTMANAGER_PORT, NAME, PROMETHEUS_PORT
from trainmaster.cluster._processes import ClusterError
from trainmaster.kubeclient import ApiError, SyncKube, pod_path


@dataclass(frozen=True)
class Target:
    pool: str
    """The operator's scrape job: serviceMonitor/<ns>/<name>/0 or podMonitor/<ns>/<name>/0."""
    url: str
    health: str
    labels: dict[str, str]
    error: str


@dataclass(frozen=True)
class AlertEpisode:
    """One stretch of time an alert was firing, from Prometheus' ALERTS series."""

    alertname: str
    labels: dict[str, str]
    """Its labels but alertname and alertstate."""
    start: float
    """Unix time of the first evaluation that found it firing."""
    end: float | None
    """Of the last one; None: still firing at the end of the range."""


def alert_episodes(matrix: list[dict[str, Any]], step: float, until: float
                   ) -> list[AlertEpisode]:
    """A range query's ALERTS{alertstate="firing"} series cut into episodes: samples more
    than two steps apart are two episodes (the alert resolved in between). Oldest first."""
    out = []
    for series in matrix:
        labels = {k: str(v) for k, v in (series.get("metric") or {}).items()
                  if k not in ("__name__", "alertstate")}
        name = labels.pop("alertname", "")
        times = sorted(float(t) for t, _ in series.get("values") or [])
        start = last = None
        for t in times:
            if start is None or last is None:
                start = last = t
            elif t - last > 2 * step:
                out.append(AlertEpisode(name, labels, start, last))
                start = last = t
            else:
                last = t
        if start is not None and last is not None:
            out.append(AlertEpisode(name, labels, start, None if until - last <= 2 * step
                                    else last))
    return sorted(out, key=lambda e: (e.start, e.alertname))


@dataclass(frozen=True)
class Endpoints:
    prometheus: str
    alertmanager: str

    def get(self, url: str, timeout: float = 10) -> Any:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                return json.loads(resp.read())
        except OSError as exc:
            raise ClusterError(f"GET {url} failed: {exc}") from None

    def prom(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        doc = self.get(f"{self.prometheus}{path}{query}")
        if doc.get("status") != "success":
            raise ClusterError(f"Prometheus {path}: {doc.get('error') or doc}")
        return doc["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's series (a vector), or an error naming the query."""
        data = self.prom("/api/v1/query", query=promql)
        if data["resultType"] != "vector":
            raise ClusterError(f"{promql}: a {data['resultType']}, not a vector")
        result: list[dict[str, Any]] = data["result"]
        return result

    def history(self, seconds: float = 3600, step: float = 15,
                now: float | None = None) -> list[AlertEpisode]:
        """Every alert that fired in the last `seconds`: when it began and ended (Prometheus
        keeps ALERTS as a series, evaluated at every rule evaluation)."""
        until = time.time() if now is None else now
        data = self.prom("/api/v1/query_range", query='ALERTS{alertstate="firing"}',
                         start=f"{until - seconds:.3f}", end=f"{until:.3f}", step=f"{step:g}")
        return alert_episodes(data["result"], step, until)

    def targets(self) -> list[Target]:
        return [
            Target(t["scrapePool"], t["scrapeUrl"], t["health"], t["labels"],
                   t.get("lastError") or "")
            for t in self.prom("/api/v1/targets", state="active")["activeTargets"]
        ]

    def alerts(self) -> list[dict[str, Any]]:
        """Prometheus' pending and firing alerts."""
        alerts: list[dict[str, Any]] = self.prom("/api/v1/alerts")["alerts"]
        return alerts

    def received(self) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds (what reached it), active or not."""
        got: list[dict[str, Any]] = self.get(f"{self.alertmanager}/api/v2/alerts")
        return got


def _pod_ip(kube: SyncKube, namespace: str, name: str) -> str:
    try:
        pod = kube.get(pod_path(namespace, name))
    except ApiError as exc:
        raise ClusterError(
            f"pod {namespace}/{name} is not there ({exc.status}): was the cluster started "
            "with `trainmaster cluster up --real-nodes N --monitoring`?") from None
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise ClusterError(f"pod {namespace}/{name} has no IP yet (is it Running?)")
    return str(ip)


def endpoints(kubeconfig: Path, namespace: str) -> Endpoints:
    """Prometheus' and Alertmanager's API base URLs (their pods' IPs)."""
    with SyncKube.connect(kubeconfig) as kube:
        prom = _pod_ip(kube, namespace, f"prometheus-{NAME}-0")
        am = _pod_ip(kube, namespace, f"alertmanager-{NAME}-0")
    return Endpoints(f"http://{prom}:{PROMETHEUS_PORT}", f"http://{am}:{ALERTMANAGER_PORT}")
