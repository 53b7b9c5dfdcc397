"""A status patch through the pod's service account, with the standard library only: the
launcher bundle runs in training images that have Python but not trainmaster's
dependencies."""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from trainmaster.api import API_VERSION, IN_CLUSTER_ENV, SERVICE_ACCOUNT_DIR_ENV, TRAININGJOB_PLURAL

ACCOUNT = Path(os.environ.get(SERVICE_ACCOUNT_DIR_ENV)
               or "/var/run/secrets/kubernetes.io/serviceaccount")
"""The pod's service-account mount (token, ca.crt); the variable is for tests."""
TRAININGJOBS = f"/apis/{API_VERSION}/namespaces/{{ns}}/{TRAININGJOB_PLURAL}/{{name}}/status"


def in_cluster(account: Path = ACCOUNT) -> bool:
    return bool(os.environ.get(IN_CLUSTER_ENV)) and (account / "token").exists()


def patch_status(namespace: str, name: str, body: dict[str, Any],
                 account: Path = ACCOUNT, timeout: float = 10.0) -> None:
    """JSON-merge-patch the TrainingJob's status; raises OSError (urllib's errors) on failure."""
    host = os.environ[IN_CLUSTER_ENV]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # an IPv6 service address
        host = f"[{host}]"
    path = TRAININGJOBS.format(ns=quote(namespace, safe=""), name=quote(name, safe=""))
    # Read on every report: projected service-account tokens are rotated by the kubelet.
    token = (account / "token").read_text().strip()
    context = ssl.create_default_context(cafile=str(account / "ca.crt"))
    request = urllib.request.Request(
        f"https://{host}:{port}{path}", data=json.dumps(body).encode(), method="PATCH",
        headers={"Authorization": f"Bearer {token}",
                 "Content-Type": "application/merge-patch+json",
                 "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        response.read()
