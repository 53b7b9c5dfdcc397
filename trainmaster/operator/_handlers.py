"""kopf handlers, one per cause. Each translates an event into a call on the Runtime and
returns: decisions are made by the job's worker (see _supervisor), never in a handler, so
two handlers firing at once cannot act twice on one job.

    cause                                 handler              effect
    ───────────────────────────────────── ──────────────────── ─────────────────────────────
    login                                 login                credentials from kubeconfig
    startup / cleanup                     start / stop         open / close the Runtime
    TrainingJob created, resumed, spec    trainingjob_spec     validate (PermanentError),
                                                               wake worker to apply
    any TrainingJob event                 trainingjob_event    wake worker; DELETED: end it
    owned Job/Service/ConfigMap/PodGroup  owned_changed        wake owner to re-apply (drift)
    gang pod event                        gang_pod             wake its job
    node event                            node_changed         fence if sick, wake its jobs
    warm-up pod succeeded                 warmup_pod           label its node with the dataset
    warm-up pod failed                    warmup_pod           record it, wake held jobs
"""

from __future__ import annotations

from typing import Any

import kopf

from trainmaster.api import DATASET_LABEL, JOB_LABEL
from trainmaster.objects import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    TRAININGJOB_VERSION,
)
from trainmaster.operator._runtime import OperatorConfig, Runtime, owner_of
from trainmaster.operator._specs import InvalidJob
from trainmaster.operator._supervisor import Retry

TRAININGJOBS = (TRAININGJOB_GROUP, TRAININGJOB_VERSION, TRAININGJOB_PLURAL)
OWNED = (
    ("batch", "v1", "jobs"),
    ("", "v1", "services"),
    ("", "v1", "configmaps"),
    (PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL),
)


class _Holder:
    """The Runtime, created by the startup handler inside kopf's event loop."""

    runtime: Runtime | None = None

    def get(self) -> Runtime:
        if self.runtime is None:
            raise kopf.TemporaryError("the operator is still starting", delay=1)
        return self.runtime


def connection_info(
    config: OperatorConfig, logger: Any, settings: kopf.OperatorSettings
) -> kopf.ConnectionInfo | None:
    """kopf's credentials: the same kubeconfig (or service account) our own client uses."""
    from trainmaster.kubeclient import choose_kubeconfig, load_sync_configuration

    if choose_kubeconfig(config.kubeconfig) is None:
        return kopf.login_with_service_account(logger=logger, settings=settings)
    cfg = load_sync_configuration(config.kubeconfig)
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
        "authorization"
    )
    scheme, _, token = (header or "").partition(" ")
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme or None,
        token=token or None,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


def _owned(body: kopf.Body, **_: Any) -> bool:
    return owner_of(dict(body)) is not None


def build_registry(config: OperatorConfig) -> kopf.OperatorRegistry:
    """A fresh registry (not kopf's global one), so several operators can live in one
    process, e.g. in tests."""
    registry = kopf.OperatorRegistry()
    holder = _Holder()

    @kopf.on.login(registry=registry)
    def login(
        logger: Any, settings: kopf.OperatorSettings, **_: Any
    ) -> kopf.ConnectionInfo | None:
        return connection_info(config, logger, settings)

    @kopf.on.startup(registry=registry)
    async def start(**_: Any) -> None:
        holder.runtime = await Runtime.open(config)

    @kopf.on.cleanup(registry=registry)
    async def stop(**_: Any) -> None:
        if holder.runtime is not None:
            await holder.runtime.close()
            holder.runtime = None

    @kopf.on.resume(*TRAININGJOBS, registry=registry)
    @kopf.on.create(*TRAININGJOBS, registry=registry)
    @kopf.on.update(*TRAININGJOBS, field="spec", registry=registry)
    async def trainingjob_spec(
        name: str, namespace: str | None, spec: kopf.Spec, **_: Any
    ) -> None:
        runtime, namespace = holder.get(), namespace or ""
        try:
            await runtime.check(name, dict(spec))
        except Retry as exc:
            raise kopf.TemporaryError(str(exc), delay=exc.delay) from None
        except InvalidJob as exc:
            runtime.poke(namespace, name)  # its worker records SpecValid=False in status
            raise kopf.PermanentError(f"invalid spec: {exc}") from None
        runtime.poke(namespace, name, apply=True)

    @kopf.on.event(*TRAININGJOBS, registry=registry)
    async def trainingjob_event(
        type: str | None, name: str, namespace: str | None, **_: Any
    ) -> None:
        runtime, namespace = holder.get(), namespace or ""
        if type == "DELETED":
            await runtime.forget(namespace, name)
        else:
            runtime.poke(namespace, name)

    for group, version, plural in OWNED:

        @kopf.on.event(group, version, plural, when=_owned, registry=registry,
                       id=f"owned-{plural}")
        async def owned_changed(body: kopf.Body, namespace: str | None, **_: Any) -> None:
            holder.get().on_child(dict(body), namespace or "")

    @kopf.on.event("", "v1", "pods", labels={JOB_LABEL: kopf.PRESENT}, registry=registry)
    async def gang_pod(body: kopf.Body, type: str | None, **_: Any) -> None:
        holder.get().on_pod(dict(body), type)

    @kopf.on.event("", "v1", "pods", labels={DATASET_LABEL: kopf.PRESENT}, registry=registry,
                   id="warmup-pod")
    async def warmup_pod(body: kopf.Body, type: str | None, **_: Any) -> None:
        await holder.get().on_warmup_pod(dict(body), type)

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_changed(body: kopf.Body, type: str | None, **_: Any) -> None:
        await holder.get().on_node(dict(body), type)

    return registry
