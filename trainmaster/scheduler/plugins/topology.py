"""Topology domain choice: which domain of a rank a gang tries first.

The placement tries ranks smallest first (node, leaf, ..., cluster; a ``required``
constraint stops at its level) and, at each rank, the domains whose free capacity covers
the gang in this plugin's order; the first that packs wins. Tightest first (least free
primary resource, i.e. least left over afterwards, then by name) keeps emptier domains
whole for larger gangs.
"""

from __future__ import annotations

from typing import ClassVar

from ..framework.interface import LiveDomain


class TightestDomain:
    NAME: ClassVar[str] = "TightestDomain"

    def order_domains(self, domains: list[LiveDomain], primary: str) -> None:
        domains.sort(key=lambda d: (d.free.get(primary, 0), d.name))
