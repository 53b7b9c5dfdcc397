"""Asking the API server what an identity may do: SubjectAccessReview for a ServiceAccount,
and requests made as that ServiceAccount (impersonation headers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import kubernetes
from kubernetes import dynamic

from trainmaster.kubeclient import generated_client as sync_client


@dataclass(frozen=True)
class Action:
    """One request an identity might make: `verb` on `group`/`resource`[/`sub`] (named
    `name`) in `namespace` ("" = cluster-wide or cluster-scoped)."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    name: str = ""

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{named}{where}"

    def attributes(self) -> dict[str, Any]:
        resource, _, sub = self.resource.partition("/")
        attrs: dict[str, Any] = {"verb": self.verb, "group": self.group, "resource": resource}
        if sub:
            attrs["subresource"] = sub
        if self.namespace:
            attrs["namespace"] = self.namespace
        if self.name:
            attrs["name"] = self.name
        return attrs


def sa_user(account: str) -> tuple[str, list[str]]:
    """User name and groups the API server gives ServiceAccount `namespace/name`."""
    namespace, name = account.split("/", 1)
    return (
        f"system:serviceaccount:{namespace}:{name}",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
    )


class Access:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.api = kubernetes.client.AuthorizationV1Api(sync_client(kubeconfig))

    def allowed(self, account: str, action: Action) -> bool:
        user, groups = sa_user(account)
        review = self.api.create_subject_access_review(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user,
                    "groups": groups,
                    "resourceAttributes": action.attributes(),
                },
            }
        )
        return bool(review.status.allowed)

    def client_as(self, account: str) -> dynamic.DynamicClient:
        """A client whose every request is made as the ServiceAccount."""
        return dynamic.DynamicClient(self.api_client_as(account))

    def api_client_as(self, account: str, extra: dict[str, str] | None = None
                      ) -> kubernetes.client.ApiClient:
        """An API client impersonating the ServiceAccount, with user-info `extra` (e.g. the
        node name a bound token carries): what a pod's projected token presents."""
        api = sync_client(self.kubeconfig)
        user, _ = sa_user(account)
        api.set_default_header("Impersonate-User", user)
        for key, value in (extra or {}).items():
            # Extra keys are case-insensitive header suffixes; `/` must be percent-encoded.
            api.set_default_header(f"Impersonate-Extra-{quote(key, safe='')}", value)
        return api
