"""Per-token rate limit: ``RATE_LIMIT_PER_MINUTE`` requests per token per minute,
and the page a throttled password sign-in answers (django-axes does the counting).

The service runs several worker processes, so the count lives in PostgreSQL,
not in process memory: one row per token and minute in the table of the
``rate_limit`` cache alias (``timothy_rate_limit``, Django's database-cache
layout, made by the memories migration ``rate_limit_table``). Each request
adds one with a single atomic upsert, so concurrent requests are all counted
and the check costs one round trip. The table is unlogged (migration 0017):
a commit that waited for the write-ahead log cost each request ~4 ms, and
counters lost in a crash only start a fresh minute. The rows are plain
counters (the count as text), read only here, never through the cache API.
The window is the calendar minute (fixed window): over the limit answers 429
with ``Retry-After`` set to the seconds left in the minute.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import caches
from django.db import connections, router
from django.http import HttpResponse
from django.shortcuts import render
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from memories.api_tokens import ApiToken

RATE_LIMIT_CACHE = "rate_limit"
WINDOW_SECONDS = 60


def _cache_database() -> str:
    return router.db_for_write(caches[RATE_LIMIT_CACHE].cache_model_class)


def _table() -> str:
    return caches[RATE_LIMIT_CACHE]._table


def count_request(key: str, expires: datetime) -> int:
    """Add one to the counter ``key`` (kept until ``expires``); return the new count."""
    connection = connections[_cache_database()]
    table = connection.ops.quote_name(_table())
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (cache_key, value, expires) VALUES (%s, '1', %s)
            ON CONFLICT (cache_key) DO UPDATE SET value = ({table}.value::bigint + 1)::text
            RETURNING value::bigint
            """,
            [key, expires],
        )
        count = cursor.fetchone()[0]
        if count == 1:
            # A new window: clear out the windows that have ended.
            cursor.execute(f"DELETE FROM {table} WHERE expires < %s", [datetime.now(UTC)])
    return count


def counter_key(token: ApiToken, window: int) -> str:
    return f"token:{token.pk}:{window}"


class TokenRateThrottle(BaseThrottle):
    """Counts requests made with an API token; anonymous requests are not counted."""

    def allow_request(self, request: Request, view) -> bool:
        token = request.auth
        limit = settings.RATE_LIMIT_PER_MINUTE
        if not isinstance(token, ApiToken) or limit <= 0:
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        window_end = datetime.fromtimestamp((window + 1) * WINDOW_SECONDS, UTC)
        self.retry_after = math.ceil((window + 1) * WINDOW_SECONDS - now)
        # Kept one window past its end, so the count stays readable for a while.
        expires = window_end + timedelta(seconds=WINDOW_SECONDS)
        count = count_request(counter_key(token, window), expires)
        return count <= limit

    def wait(self) -> float:
        return self.retry_after


# --- password sign-in (django-axes counts; this is its lockout page) ----------------


def login_locked_out(request, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the page a paused sign-in answers, 429 with Retry-After."""
    minutes = settings.LOGIN_COOLOFF_MINUTES
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.LOGIN_FAILURE_LIMIT, "cooloff_minutes": minutes},
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response
