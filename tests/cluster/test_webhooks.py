"""A controller's webhooks on loopback (unit): the release's webhook manifests rewritten to
``https://127.0.0.1:PORT/path`` with this cluster's CA, keeping only the webhooks on the
given API groups; and the serving certificate is valid for 127.0.0.1 under that CA. The
live path (the real JobSet and Kueue controllers answering them) is
tests/scheduler/test_interop_live.py."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path

from cryptography import x509

from trainmaster.cluster._webhooks import loopback_webhooks, serving_certificate, webhook_path

MANIFESTS = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}
  failurePolicy: Fail
  name: mjob.kb.io
  rules:
  - {apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate--v1-pod}
  failurePolicy: Fail
  name: vpod.kb.io
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  sideEffects: None
"""


def test_kept_webhooks_point_at_loopback_with_the_ca(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(MANIFESTS)
    ca = serving_certificate(tmp_path / "certs", "kueue")

    hooks = loopback_webhooks(manifests, "trainmaster-kueue", 9443, ca, ("batch",))

    # The pod webhooks (core group) are left out, and a configuration left empty with them.
    (mutating,) = hooks
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert mutating["metadata"]["name"] == "trainmaster-kueue-mutating"
    (job,) = mutating["webhooks"]
    assert job["name"] == "mjob.kb.io" and job["failurePolicy"] == "Fail"
    assert job["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate-batch-v1-job",
                                   "caBundle": base64.b64encode(ca).decode()}
    assert webhook_path(mutating) == ("/apis/admissionregistration.k8s.io/v1/"
                                      "mutatingwebhookconfigurations/trainmaster-kueue-mutating")


def test_serving_certificate_is_for_loopback_under_its_ca(tmp_path: Path) -> None:
    ca_pem = serving_certificate(tmp_path, "jobset")
    ca = x509.load_pem_x509_certificate(ca_pem)
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
