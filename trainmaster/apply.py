"""Server-side apply of rendered objects, in order: for `trainmaster apply` and the demo.

Pulumi is the way a platform team applies a spec from git; this is the short path for a
local cluster (and for GitOps users who want to see what Argo CD would do). Objects come
from trainmaster.objects.build_all, the same ones Pulumi registers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmaster.api import CRD_ESTABLISHED
from trainmaster.errors import TrainmasterError
from trainmaster.kubeclient import (
    KNOWN_PLURALS,
    ApiError,
    Kube,
    SyncKube,
    api_path,
    crd_path,
    namespace_path,
    object_path,
)
from trainmaster.objects import (
    PROBE_REFUSAL,
    REQUIRED_THIRD_PARTY_CRDS,
    THIRD_PARTY_CRD_NAMES,
    all_objects,
    covers_immutable,
    display_key,
    foreign_manager,
    guarded_by,
    immutable_fields,
    object_key,
    probe_pod,
    third_party_crds,
)
from trainmaster.polling import WaitTimeout, wait_until_async
from trainmaster.spec import ClusterSpec


class ApplyError(TrainmasterError):
    """An object could not be applied."""


async def _wait_established(kube: Kube, names: list[str], timeout: float) -> None:
    pending = set(names)

    async def all_established() -> bool:
        for name in list(pending):
            conditions = ((await kube.get(crd_path(name))).get("status") or {}).get(
                "conditions") or []
            if any(c.get("type") == CRD_ESTABLISHED and c.get("status") == "True"
                   for c in conditions):
                pending.discard(name)
        return not pending

    try:
        await wait_until_async(all_established, "CRDs to be established", timeout, 0.2)
    except WaitTimeout:
        raise ApplyError(
            f"CRDs not established after {timeout:.0f}s: {', '.join(pending)}") from None


_OPERATOR_OF = {
    "monitoring.coreos.com": "the Prometheus operator",
    "k8s.cni.cncf.io": "Multus",
}
"""API groups of the third-party kinds trainmaster renders, and the project that serves them."""


async def _apply_one(kube: Kube, obj: dict[str, Any], dry_run: bool = False) -> None:
    kind = (obj["apiVersion"], obj["kind"])
    try:
        if kind not in KNOWN_PLURALS:
            await kube.resource(*kind)
    except ApiError as exc:
        if not exc.not_found:
            raise ApplyError(f"discovering {kind[0]} {kind[1]} failed: {exc}") from None
        group = kind[0].split("/")[0]
        owner = _OPERATOR_OF.get(group)
        hint = (f"install {owner} first (docs/real-cluster.md)" if owner else
                "is its CRD installed?")
        if owner and (group, kind[1]) not in REQUIRED_THIRD_PARTY_CRDS:
            hint += ", or set thirdPartyCrds: IfAbsent in the spec to install trainmaster's " \
                    "stand-in CRD"
        raise ApplyError(f"the API server does not serve {kind[0]} {kind[1]}: {hint}") from None
    try:
        await kube.apply(obj, dry_run=dry_run)
    except ApiError as exc:
        raise ApplyError(
            f"applying {object_key(obj)} failed: {exc.status} {exc.reason}: {exc.body}"
        ) from None


async def crd_owner(kube: Kube, name: str) -> str | None:
    """Who owns the existing CRD `name` if it is not trainmaster's stub; None if it is
    absent or ours (so applying our stub is safe)."""
    try:
        existing = await kube.get(crd_path(name))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise ApplyError(f"reading CRD {name} failed: {exc.status} {exc.reason}") from None
    return foreign_manager(existing)


def _third_party_crd_of(obj: dict[str, Any]) -> str | None:
    group = obj["apiVersion"].split("/")[0]
    required = REQUIRED_THIRD_PARTY_CRDS.get((group, obj["kind"]))
    if required is not None:
        return required[0]
    for crd in third_party_crds():
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == obj["kind"]:
            return str(crd["metadata"]["name"])
    return None


_REQUIRED_CRD_OWNERS = dict(REQUIRED_THIRD_PARTY_CRDS.values())


async def _absent_crds(kube: Kube, objs: list[dict[str, Any]]) -> list[str]:
    """Third-party CRDs that kinds among `objs` need, which the cluster lacks and `objs`
    do not bring."""
    bringing = {o["metadata"]["name"] for o in objs if o["kind"] == "CustomResourceDefinition"}
    needed = {name for o in objs if (name := _third_party_crd_of(o)) and name not in bringing}
    absent = []
    for name in sorted(needed):
        try:
            await kube.get(crd_path(name))
        except ApiError as exc:
            if not exc.not_found:
                raise ApplyError(f"reading CRD {name} failed: {exc.status} {exc.reason}"
                                 ) from None
            absent.append(name)
    return absent


async def missing_operators(kube: Kube, objs: list[dict[str, Any]],
                            skip_absent: bool = False) -> list[str]:
    """Third-party kinds among `objs` whose CRD the cluster lacks and `objs` do not bring,
    one line each, naming what to install: Multus's always (a stored attachment that no
    Multus acts on attaches nothing); the Prometheus operator's unless `skip_absent`
    (`thirdPartyCrds: Skip`, where those objects are left out instead, `skipped_objects`)."""
    missing = []
    for name in await _absent_crds(kube, objs):
        if skip_absent and name not in _REQUIRED_CRD_OWNERS:
            continue
        group = name.split(".", 1)[1]
        missing.append(f"CRD {name} is missing: install {_OPERATOR_OF.get(group, group)}"
                       + ("" if name in _REQUIRED_CRD_OWNERS else
                          " (or set thirdPartyCrds: Skip to leave its objects out, or "
                          "IfAbsent for inert stand-in CRDs)"))
    return missing


async def skipped_objects(kube: Kube, objs: list[dict[str, Any]]) -> tuple[list[str], set[str]]:
    """With `thirdPartyCrds: Skip`: the lines that say which operator is absent, and the
    keys (`object_key`) of the objects of its kinds, which are left out."""
    absent = [n for n in await _absent_crds(kube, objs) if n not in _REQUIRED_CRD_OWNERS]
    lines: list[str] = []
    keys: set[str] = set()
    for name in absent:
        group = name.split(".", 1)[1]
        mine = [o for o in objs if _third_party_crd_of(o) == name]
        keys.update(object_key(o) for o in mine)
        lines.append(f"skipped {len(mine)} object(s) of CRD {name}: the cluster lacks it; "
                     f"install {_OPERATOR_OF.get(group, group)} and apply again "
                     f"({', '.join(display_key(o) for o in mine)})")
    return lines, keys


def missing_operators_message(missing: list[str]) -> str:
    return ("the cluster lacks operators the spec needs (docs/real-cluster.md); install them:"
            "\n  " + "\n  ".join(missing))


def _invalid_fields(exc: ApiError) -> list[str]:
    """The fields a 422 Invalid answer names (its status details' causes)."""
    details = (exc.body or {}).get("details") or {}
    return [str(c["field"]) for c in details.get("causes") or [] if c.get("field")]


async def immutable_conflicts(kube: Kube, objs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Objects whose update would change an immutable field: display key -> fields.

    Each existing object of a kind with immutable fields is applied with dry run, so the
    API server itself judges (defaults and all) what the real apply would do. An answer
    naming a field outside the immutable ones is a plain invalid object: ApplyError,
    before anything is applied.
    """
    conflicts: dict[str, list[str]] = {}
    refused: list[str] = []
    for obj in objs:
        if not immutable_fields(obj):
            continue
        try:
            await kube.apply(obj, dry_run=True)
        except ApiError as exc:
            if exc.not_found:  # a new object (or its namespace is new): nothing to replace
                continue
            fields = _invalid_fields(exc)
            if (exc.status == 422 and fields and all(covers_immutable(obj, f) for f in fields)
                    and await _exists(kube, obj)):  # a new object has nothing to replace
                conflicts[display_key(obj)] = fields
            else:
                refused.append(f"{display_key(obj)}: {exc.status} {exc.reason}: "
                               f"{(exc.body or {}).get('message', '')}")
    if refused:
        raise ApplyError("the API server refuses these objects; nothing was applied:\n  "
                         + "\n  ".join(refused))
    return conflicts


async def _path(kube: Kube, obj: dict[str, Any]) -> str:
    if (obj["apiVersion"], obj["kind"]) in KNOWN_PLURALS:
        return object_path(obj)
    plural, namespaced = await kube.resource(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    return api_path(obj["apiVersion"], plural, meta.get("namespace") if namespaced else None,
                    meta["name"])


async def _exists(kube: Kube, obj: dict[str, Any]) -> bool:
    try:
        await kube.get(await _path(kube, obj))
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def _replace(kube: Kube, obj: dict[str, Any], timeout: float = 120) -> None:
    """Delete `obj` and wait until it is gone, so that it can be created anew."""
    path = await _path(kube, obj)
    await kube.delete(path, propagation="Background", missing_ok=True)

    async def gone() -> bool:
        return not await _exists(kube, obj)

    try:
        await wait_until_async(gone, f"{display_key(obj)} to be deleted", timeout, 0.2)
    except WaitTimeout:
        raise ApplyError(f"{display_key(obj)} was not deleted within {timeout:.0f}s "
                         "(a finalizer?); delete it by hand, then apply again") from None


async def _apply_all(kube: Kube, objs: list[dict[str, Any]],
                     report: Callable[[str], None], dry_run: bool = False,
                     skip_absent: bool = True) -> list[str]:
    # One request first: a server that does not answer is the client's ApiError (status
    # 0), which the CLI reports naming the server, not an ApplyError about some object.
    await kube.get("/version")
    missing = await missing_operators(kube, objs, skip_absent)
    if missing:  # before anything is applied: never half a stack
        raise ApplyError(missing_operators_message(missing))
    if skip_absent:  # objects of an absent operator's kinds: said, and left out
        lines, skipped = await skipped_objects(kube, objs)
        for line in lines:
            report(line)
        objs = [o for o in objs if object_key(o) not in skipped]
    # Also before anything is applied: which objects an immutable field forces to be
    # replaced (or which the API server refuses outright).
    replace = await immutable_conflicts(kube, objs)
    applied = []
    crds = [o["metadata"]["name"] for o in objs if o["kind"] == "CustomResourceDefinition"]
    done_crds = False
    # Kinds this apply brings with its own CRDs: in a dry run the server cannot know them
    # yet (nothing is stored), so those objects are reported, not sent.
    new_kinds = {(f"{o['spec']['group']}/{v['name']}", o["spec"]["names"]["kind"])
                 for o in objs if o["kind"] == "CustomResourceDefinition"
                 for v in o["spec"].get("versions") or []}
    # Likewise namespaces this apply creates: nothing can be checked inside them yet.
    absent: set[str] = set()
    if dry_run:
        for o in objs:
            if o["kind"] == "Namespace":
                try:
                    await kube.get(namespace_path(o["metadata"]["name"]))
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                    absent.add(o["metadata"]["name"])
    for obj in objs:
        if dry_run and obj["metadata"].get("namespace") in absent:
            report(f"not checked {obj['kind']}/{obj['metadata']['name']}: its namespace "
                   "is created by this apply")
            continue
        if dry_run:
            key = (obj["apiVersion"], obj["kind"])
            if key in new_kinds and key not in KNOWN_PLURALS:
                try:
                    await kube.resource(*key)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                    report(f"not checked {obj['kind']}/{obj['metadata']['name']}: its "
                           "CRD is created by this apply")
                    continue
            fields = replace.get(display_key(obj))
            if fields:  # its dry-run apply is refused: the real apply replaces it
                report(f"would replace {display_key(obj)} (delete, then create): "
                       f"{', '.join(fields)} cannot be changed in place")
            else:
                await _apply_one(kube, obj, dry_run=True)
                report(f"checked {obj['kind']}/{obj['metadata']['name']}")
            applied.append(object_key(obj))
            continue
        if crds and not done_crds and obj["kind"] != "CustomResourceDefinition":
            report("waiting for CRDs to be established")
            await _wait_established(kube, crds, 60)
            kube.rediscover()  # discover the new kinds
            done_crds = True
        name = obj["metadata"]["name"]
        if obj["kind"] == "CustomResourceDefinition" and name in THIRD_PARTY_CRD_NAMES:
            owner = await crd_owner(kube, name)
            if owner is not None:
                report(f"kept CustomResourceDefinition/{name}: it belongs to {owner}")
                continue
        fields = replace.get(display_key(obj))
        if fields:
            report(f"replacing {display_key(obj)} (delete, then create): "
                   f"{', '.join(fields)} cannot be changed in place")
            await _replace(kube, obj)
        await _apply_one(kube, obj)
        applied.append(object_key(obj))
        report(f"{'replaced' if fields else 'applied'} {obj['kind']}/{obj['metadata']['name']}")
    if not dry_run:
        await _wait_guardrails(kube, objs, report)
    return applied


async def _wait_guardrails(kube: Kube, objs: list[dict[str, Any]],
                           report: Callable[[str], None], timeout: float = 60) -> None:
    """Until each applied guardrail refuses apply's dry-run probe pod: the API server
    compiles admission policies asynchronously (about a second, longer under load), and
    apply is done when they are in force. Policies applied earlier in the same apply
    (the scheduler's not-served policy) are seen in order, so they are in force too."""
    for namespace in guarded_by(objs):
        path = f"{namespace_path(namespace)}/pods"

        async def refused(path: str = path) -> bool:
            try:
                await kube.request("POST", path, params={"dryRun": "All"}, body=probe_pod())
            except ApiError as exc:
                return exc.status in (403, 422) and PROBE_REFUSAL in f"{exc.reason} {exc.body}"
            return False

        try:
            await wait_until_async(refused, f"the guardrails of {namespace} in force",
                                   timeout, 0.2)
        except WaitTimeout:
            raise ApplyError(
                f"the admission policy guarding namespace {namespace} was applied but is "
                f"not in force after {timeout:.0f}s: check the API server's "
                "ValidatingAdmissionPolicy support (admissionregistration.k8s.io/v1) and "
                "that the namespace exists") from None
        report(f"guardrails in force in namespace {namespace}")


def apply_objects(
    kubeconfig: Path | None,
    objs: list[dict[str, Any]],
    report: Callable[[str], None] = lambda _: None,
    dry_run: bool = False,
    skip_absent: bool = True,
) -> list[str]:
    """Apply each object (server-side, the trainmaster field manager); return their keys.
    ``dry_run``: the server checks each object and stores nothing (kubectl's
    ``--dry-run=server``); objects of kinds whose CRD is new are reported, not checked.
    ``skip_absent``: objects of an optional operator the cluster lacks (the Prometheus
    operator's kinds) are reported and left out; otherwise nothing is applied."""
    with SyncKube.connect(kubeconfig) as kube:
        return kube.run(_apply_all(kube.kube, objs, report, dry_run, skip_absent))


def foreign_crds(kubeconfig: Path | None) -> dict[str, str]:
    """Third-party CRDs the cluster already has from someone else: name -> owner. The
    Pulumi program leaves these out, as `trainmaster apply` does."""

    async def scan(kube: Kube) -> dict[str, str]:
        owners = {}
        for name in sorted(THIRD_PARTY_CRD_NAMES):
            owner = await crd_owner(kube, name)
            if owner is not None:
                owners[name] = owner
        return owners

    with SyncKube.connect(kubeconfig) as kube:
        return kube.run(scan(kube.kube))


def missing_operators_of(kubeconfig: Path | None, objs: list[dict[str, Any]],
                         skip_absent: bool = False) -> list[str]:
    """`missing_operators`, for callers without an event loop (the Pulumi program)."""
    with SyncKube.connect(kubeconfig) as kube:
        return kube.run(missing_operators(kube.kube, objs, skip_absent))


def skipped_objects_of(kubeconfig: Path | None, objs: list[dict[str, Any]]
                       ) -> tuple[list[str], set[str]]:
    """`skipped_objects`, for callers without an event loop (the Pulumi program)."""
    with SyncKube.connect(kubeconfig) as kube:
        return kube.run(skipped_objects(kube.kube, objs))


def apply_spec(
    kubeconfig: Path | None, spec: ClusterSpec, report: Callable[[str], None] = lambda _: None,
    dry_run: bool = False,
) -> list[str]:
    return apply_objects(kubeconfig, all_objects(spec), report, dry_run,
                         skip_absent=spec.third_party_crds == "Skip")
