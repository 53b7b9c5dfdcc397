"""One ComponentResource per part of the cluster (networks, scheduler, ...)."""

from __future__ import annotations

from typing import Any

import pulumi

from components._object import KubernetesObject, register_objects


class ObjectsComponent(pulumi.ComponentResource):
    """A part of the training cluster: the objects trainmaster.objects builds for it."""

    objects: list[KubernetesObject]
    object_names: pulumi.Output[list[str]]

    def __init__(
        self,
        token: str,
        name: str,
        objs: list[dict[str, Any]],
        opts: pulumi.ResourceOptions | None = None,
        child_opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(token, name, {}, opts)
        self.objects = register_objects(objs, self, child_opts)
        names = [f"{o['kind']}/{o['metadata']['name']}" for o in objs]
        self.object_names = pulumi.Output.from_input(names)
        self.register_outputs({"objectNames": names})
