"""What the API server did between two reads of its own /metrics: requests by verb and
resource, watch events sent by resource, and the watches open on pods.

Why its own counters: they count every client (the scheduler, kwok, the controller
manager, the benchmark), with no audit log slowing the server being measured. They do
not name the client: ``PATCH pods/status`` is both kwok's (pods Running) and the
scheduler's (``PodScheduled=False``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping

Labels = dict[str, str]

_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"')

REQUESTS = "apiserver_request_total"
WATCH_EVENTS = "apiserver_watch_events_total"
LONG_RUNNING = "apiserver_longrunning_requests"


def samples(text: str, name: str) -> Iterator[tuple[Labels, float]]:
    """The samples of metric ``name`` in Prometheus' text format, with their labels."""
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        found = _SAMPLE.match(line)
        if found is None or found.group(1) != name:
            continue
        labels = dict(_LABEL.findall(found.group(2) or ""))
        try:
            yield labels, float(found.group(3))
        except ValueError:
            continue


def _resource(labels: Labels) -> str:
    sub = labels.get("subresource", "")
    return labels.get("resource", "") + (f"/{sub}" if sub else "")


def request_counts(text: str) -> dict[str, float]:
    """``apiserver_request_total`` summed by ``"VERB resource[/subresource]"`` (every
    code, group and version: ``POST events`` holds both events APIs). The server counts
    a collection delete as ``DELETE`` of a namespace or the cluster (one object's is of
    scope ``resource``): it is ``DELETECOLLECTION`` here, apart from one object's."""
    counts: defaultdict[str, float] = defaultdict(float)
    for labels, value in samples(text, REQUESTS):
        verb = labels.get("verb", "")
        if verb == "DELETE" and labels.get("scope") in ("namespace", "cluster"):
            verb = "DELETECOLLECTION"
        counts[f"{verb} {_resource(labels)}"] += value
    return dict(counts)


def watch_events(text: str) -> dict[str, float]:
    """``apiserver_watch_events_total`` (events sent to watchers) summed by resource."""
    counts: defaultdict[str, float] = defaultdict(float)
    for labels, value in samples(text, WATCH_EVENTS):
        counts[labels.get("resource") or labels.get("kind", "")] += value
    return dict(counts)


def open_watches(text: str, resource: str) -> int:
    """Watches of ``resource`` open now (``apiserver_longrunning_requests``)."""
    return int(sum(value for labels, value in samples(text, LONG_RUNNING)
                   if labels.get("verb") == "WATCH" and _resource(labels) == resource))


def increase(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, int]:
    """What each counter gained between two reads, keys sorted, zeros left out (a
    counter that went down was reset: its whole value after)."""
    out = {}
    for key in sorted(after):
        gained = after[key] - before.get(key, 0.0)
        if gained < 0:
            gained = after[key]
        if gained > 0:
            out[key] = round(gained)
    return out
