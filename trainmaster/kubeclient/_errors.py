"""The one error type of every API call: the HTTP status, and whether retrying may help."""

from __future__ import annotations

from typing import Any

TRANSIENT_STATUSES = frozenset({0, 408, 429, 500, 502, 503, 504})
"""0 means no HTTP answer at all (connection refused or reset, timeout)."""

NOT_FOUND, CONFLICT, GONE = 404, 409, 410


class ApiError(Exception):
    """A request failed: ``status`` is the HTTP status, 0 when there was no answer."""

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}".strip())
        self.status = status
        self.reason = reason
        self.body = body

    @property
    def transient(self) -> bool:
        """Worth retrying unchanged (overload, timeouts, connection trouble)."""
        return self.status in TRANSIENT_STATUSES

    @property
    def conflict(self) -> bool:
        """409: the object changed since it was read (or already exists): read again."""
        return self.status == CONFLICT

    @property
    def not_found(self) -> bool:
        return self.status == NOT_FOUND


def is_status(exc: BaseException, *codes: int) -> bool:
    """``exc`` is an ``ApiError`` with one of these HTTP statuses."""
    return isinstance(exc, ApiError) and exc.status in codes
