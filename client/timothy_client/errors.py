"""The errors the client raises for the calls a caller makes on purpose.

``recall`` and ``extract`` never raise (they sit on the user's turn); every
other call raises one of these, so a caller can tell "the service said no"
(``ServiceError`` and its kinds, carrying the API's ``code``) from "the service
could not be reached" (``Unreachable``).
"""

from __future__ import annotations

from typing import Any


class TimothyError(Exception):
    """Base of every error this package raises."""


class Unreachable(TimothyError):
    """No answer: the connection was refused or reset, or the call timed out (after retries)."""


class MalformedAnswer(TimothyError):
    """The answer is not what the Timothy API sends (not JSON, or missing fields)."""


class InvalidToolCall(TimothyError):
    """A tool call's arguments do not match the tool's schema."""


class ServiceError(TimothyError):
    """The service answered with an error: ``{"error": {"code", "message", "details"}}``."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class InvalidRequest(ServiceError):
    """400: the request is wrong (``details`` has a message per field)."""


class Unauthorized(ServiceError):
    """401: no token, or a wrong, revoked or unknown one."""


class NotFound(ServiceError):
    """404: no such memory for this owner (another owner's id looks the same)."""


class IllegalTransition(ServiceError):
    """409: the memory's status does not allow the action."""

    @property
    def current_status(self) -> str | None:
        return self.details.get("status")

    @property
    def head_id(self) -> int | None:
        """For a superseded memory, the head of its chain: act on that one instead."""
        return self.details.get("head_id")


class IdempotencyKeyReused(ServiceError):
    """422: the Idempotency-Key was already used for a different request."""


class RateLimited(ServiceError):
    """429: over the per-token rate limit; ``retry_after`` is in seconds."""

    def __init__(self, *args: Any, retry_after: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after = retry_after


class ServiceUnavailable(ServiceError):
    """5xx: the service (or its database, or its LLM) cannot do it now."""


_BY_STATUS: dict[int, type[ServiceError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    404: NotFound,
    409: IllegalTransition,
    422: IdempotencyKeyReused,
}


def error_class_for(status: int) -> type[ServiceError]:
    if status >= 500:
        return ServiceUnavailable
    return _BY_STATUS.get(status, ServiceError)
