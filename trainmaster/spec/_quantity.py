"""Kubernetes-style quantities ("512Gi", "1.5Ti", "64") as integers."""

from __future__ import annotations

import re
from decimal import Decimal

QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
_RE = re.compile(QUANTITY_PATTERN)
_FACTORS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_quantity(text: str) -> int:
    """Bytes (or units) in a quantity string; ValueError if it is not one."""
    match = _RE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a quantity like 512Gi")
    suffix = match.group(2) or ""
    return int(Decimal(text[: len(text) - len(suffix)]) * _FACTORS[suffix])


def format_bytes(value: int) -> str:
    """Shortest exact binary-suffixed form, e.g. 2199023255552 -> 2Ti."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        factor = _FACTORS[suffix]
        if value >= factor and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)
