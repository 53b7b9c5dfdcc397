"""RFC 3339 timestamps as the API server writes them, and as trainmaster writes them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

UTC = timezone(timedelta(0))
"""UTC, spelled so that the launcher bundle, which holds this package, runs on Python < 3.11
(no datetime.UTC)."""


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp ("2026-01-01T00:00:00Z") as an aware datetime; None when it
    is absent or not a timestamp (a status field someone else wrote). A stamp without a
    zone is taken as UTC, as the API server means it."""
    if not isinstance(text, str) or not text:
        return None
    try:  # Python < 3.11 reads no "Z" (the launcher bundle runs on 3.8)
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def epoch_seconds(text: object) -> float:
    """parse_time as seconds since the epoch; 0.0 when absent (a pod not yet started)."""
    parsed = parse_time(text)
    return parsed.timestamp() if parsed is not None else 0.0


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC with milliseconds, e.g. 2026-01-01T00:00:00.000Z."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_seconds(when: datetime) -> str:
    """RFC 3339 with whole seconds: what v1 Event timestamps accept."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
