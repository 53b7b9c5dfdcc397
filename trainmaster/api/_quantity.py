"""Kubernetes quantities ("500m", "2Gi", "1e3", 8): one parser for every reader."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkKMGTPE]i?)?$")
_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}

BYTES_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
"""The byte sizes a spec accepts ("512Gi", "1.5Ti", "64"): a quantity without sign,
exponent or sub-unit suffix. Also the JSON Schema pattern of the spec's sizes."""
_BYTES = re.compile(BYTES_PATTERN)


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity ("500m", "2Gi", "1e3", 8) as a Decimal; ValueError if it is
    not one."""
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from None
    if suffix[:1] in ("e", "E"):
        return base * Decimal(10) ** int(suffix[1:])
    if suffix not in _SUFFIX:
        raise ValueError(f"{value!r}: unknown suffix {suffix!r}")
    return base * _SUFFIX[suffix]


def parse_bytes(text: str) -> int:
    """Bytes (or units) in a size written as BYTES_PATTERN allows; ValueError if it is not
    one."""
    if _BYTES.match(text) is None:
        raise ValueError(f"{text!r} is not a quantity like 512Gi")
    return int(parse_quantity(text))


def format_bytes(value: int) -> str:
    """Shortest exact binary-suffixed form, e.g. 2199023255552 -> 2Ti."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        factor = int(_SUFFIX[suffix])
        if value >= factor and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)
