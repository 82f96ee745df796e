"""POST to an outside JSON API (the LLM, the embeddings provider), retrying
what a busy server answers (429 and 5xx) with exponential backoff, within a
deadline.

The caller words the failures: it catches ``TimedOut``, ``Unreachable`` and
``NoTimeToRetry`` and raises its own error, and reads any final answer
(a 200, or a status that is not worth retrying) itself.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass

import requests

logger = logging.getLogger(__name__)


class TimedOut(Exception):
    """The deadline passed, or one request took longer than it was given."""


class Unreachable(Exception):
    """The request could not be made (refused, reset, bad address)."""


class NoTimeToRetry(Exception):
    """A retriable answer, but waiting for the next attempt would pass the deadline."""

    def __init__(self, status: int) -> None:
        super().__init__(f"answered {status}; no time left to retry")
        self.status = status


@dataclass(frozen=True)
class Backoff:
    retries: int
    base: float
    cap: float
    # Wait what the server's Retry-After header asks instead of base * 2**n.
    honour_retry_after: bool = False

    def pause(self, attempt: int, retry_after: str | None) -> float:
        pause = self.base * 2**attempt
        if self.honour_retry_after and retry_after:
            with contextlib.suppress(ValueError):
                pause = max(0.0, float(retry_after))
        return min(pause, self.cap)


def retriable(status: int) -> bool:
    return status == 429 or status >= 500


def post_json(
    url: str,
    body: dict,
    *,
    headers: dict[str, str],
    backoff: Backoff,
    deadline: float | None,
    request_timeout: float | None = None,
    service: str,
) -> requests.Response:
    """The first answer that is not retried; ``deadline`` is a ``time.monotonic()``
    moment (None: no deadline), ``request_timeout`` caps each attempt."""
    attempt = 0
    while True:
        timeout = request_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(f"{service} did not answer in time")
            timeout = left if timeout is None else min(timeout, left)
        try:
            response = requests.post(url, json=body, headers=headers, timeout=timeout)
        except requests.Timeout as error:
            raise TimedOut(str(error)) from error
        except requests.RequestException as error:
            raise Unreachable(str(error)) from error
        if not retriable(response.status_code) or attempt >= backoff.retries:
            return response
        pause = backoff.pause(attempt, response.headers.get("Retry-After"))
        if deadline is not None and time.monotonic() + pause >= deadline:
            raise NoTimeToRetry(response.status_code)
        logger.info("%s answered %s; retrying in %.1f s", service, response.status_code, pause)
        time.sleep(pause)
        attempt += 1
