"""Per-token rate limit: ``RATE_LIMIT_PER_MINUTE`` requests per token per minute.

The service runs several worker processes, so the count lives in PostgreSQL
(Django's database cache, alias ``rate_limit``), not in process memory. Each
count is a read-and-write under a transaction-scoped advisory lock on the key,
so concurrent requests of one token are all counted. The window is the
calendar minute (fixed window): over the limit answers 429 with
``Retry-After`` set to the seconds left in the minute.
"""

from __future__ import annotations

import math
import threading
import time

from django.conf import settings
from django.core.cache import caches
from django.core.management import call_command
from django.db import IntegrityError, ProgrammingError, connections, router, transaction
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from memories.models import ApiToken

RATE_LIMIT_CACHE = "rate_limit"
WINDOW_SECONDS = 60

_table_ready = False
_table_lock = threading.Lock()


def _cache_database() -> str:
    return router.db_for_write(caches[RATE_LIMIT_CACHE].cache_model_class)


def ensure_rate_limit_table() -> None:
    """Create the cache table once per process if it does not exist yet.

    ``manage.py createcachetable`` does the same at deployment; this keeps a
    fresh database (or a test database) from failing every API call.
    """
    global _table_ready
    if _table_ready:
        return
    with _table_lock:
        if not _table_ready:
            try:
                call_command("createcachetable", database=_cache_database(), verbosity=0)
            except (IntegrityError, ProgrammingError):
                # Another worker process created it at the same moment; the
                # second look finds it and does nothing.
                call_command("createcachetable", database=_cache_database(), verbosity=0)
            _table_ready = True


def count_request(key: str) -> int:
    """Add one to the counter ``key`` and return the new count."""
    global _table_ready
    ensure_rate_limit_table()
    cache = caches[RATE_LIMIT_CACHE]
    database = _cache_database()
    try:
        return _increment(cache, database, key)
    except ProgrammingError:
        # The table vanished under us (a rolled-back test transaction, a
        # restored dump): create it again and count once more.
        _table_ready = False
        ensure_rate_limit_table()
        return _increment(cache, database, key)


def _increment(cache, database: str, key: str) -> int:
    with transaction.atomic(using=database):
        with connections[database].cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
        count = (cache.get(key) or 0) + 1
        cache.set(key, count, WINDOW_SECONDS * 2)
    return count


class TokenRateThrottle(BaseThrottle):
    """Counts requests made with an API token; anonymous requests are not counted."""

    def allow_request(self, request: Request, view) -> bool:
        token = request.auth
        limit = settings.RATE_LIMIT_PER_MINUTE
        if not isinstance(token, ApiToken) or limit <= 0:
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        self.retry_after = math.ceil(WINDOW_SECONDS - now % WINDOW_SECONDS)
        return count_request(f"token:{token.pk}:{window}") <= limit

    def wait(self) -> float:
        return self.retry_after
