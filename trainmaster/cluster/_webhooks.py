"""Admission webhooks of a controller that runs as a host process of the local control
plane (JobSet, Kueue): served on loopback with a certificate of their own, and registered
with a WebhookConfiguration whose ``clientConfig.url`` is ``https://127.0.0.1:PORT/path``.

On a real cluster the release's manifests point each webhook at a Service in front of the
controller's Deployment, with certificates from cert-manager or the controller's own
rotator. Here there is no Service network on the host, so the release's own webhook
manifests are read and rewritten: the same webhooks, rules and failure policies, the URL
in place of the Service, and a CA of this cluster's controller in ``caBundle``. Only the
webhooks whose rules name resources of the given API groups are kept (Kueue's release also
registers webhooks on every Pod, Deployment and StatefulSet for integrations not run here:
with ``failurePolicy: Fail`` they would refuse every pod while the controller is down).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from trainmaster.api import APP_MANAGED_BY_LABEL, APP_NAME_LABEL
from trainmaster.cluster._processes import ClusterError

_VALID = datetime.timedelta(days=365)
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
ADMISSION_API = "admissionregistration.k8s.io/v1"


def serving_certificate(folder: Path, name: str) -> bytes:
    """Write ``tls.crt`` and ``tls.key`` (what controller-runtime's webhook server reads
    from its certDir) for 127.0.0.1, signed by a CA made for this controller; return the
    CA's PEM, the caBundle of its webhook configurations."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-webhook-ca")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-webhook")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = folder / "tls.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return ca.public_bytes(serialization.Encoding.PEM)


def _groups(webhook: dict[str, Any]) -> set[str]:
    return {g for rule in webhook.get("rules") or () for g in rule.get("apiGroups") or ()}


def loopback_webhooks(manifests: Path, owner: str, port: int, ca_pem: bytes,
                      groups: Iterable[str]) -> list[dict[str, Any]]:
    """The release's webhook configurations, each webhook pointed at
    ``https://127.0.0.1:port`` + its path, named ``<owner>-<kind>``; only the webhooks whose
    rules are all within ``groups`` (``""`` is the core group)."""
    allowed = set(groups)
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc or doc.get("kind") not in WEBHOOK_KINDS:
            continue
        kept = []
        for hook in doc.get("webhooks") or ():
            if not _groups(hook) <= allowed:
                continue
            service = (hook.get("clientConfig") or {}).get("service") or {}
            path = service.get("path")
            if not path:
                raise ClusterError(f"{manifests}: webhook {hook.get('name')} names no "
                                   "service path to serve on loopback")
            kept.append({**hook, "clientConfig": {
                "url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}})
        if kept:
            kind = doc["kind"]
            short = "mutating" if kind.startswith("Mutating") else "validating"
            out.append({
                "apiVersion": ADMISSION_API, "kind": kind,
                "metadata": {"name": f"{owner}-{short}", "labels": {
                    APP_NAME_LABEL: owner,
                    APP_MANAGED_BY_LABEL: "trainmaster"}},
                "webhooks": kept,
            })
    return out


def webhook_path(obj: dict[str, Any]) -> str:
    """The API path of a webhook configuration (to delete it)."""
    plural = obj["kind"].lower() + "s"
    return f"/apis/{ADMISSION_API}/{plural}/{obj['metadata']['name']}"
