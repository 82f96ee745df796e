"""The access log: which token received which memories, when, and for what query.

Every search through the API (``POST /v1/memories/search``, by an owner's
token) or the internal surface (``POST /internal/v1/retrieve``, by the chat
service) leaves one ``AccessRecord``: the memories packed into the block, the
moment, and the query's first words (at most ``PREVIEW_WORDS`` words and
``PREVIEW_CHARS`` characters). The retrieval inspector is not logged: it is a
dry run by the owner, and nothing reaches an assistant.

The record is written after the answer, on a background thread, the way
recall stamps ``last_retrieved_at`` (retrieval/recall.py): a search never waits
for it, and the records of searches answered meanwhile go in the same insert.
Inside a transaction, or with ``STAMP_IN_BACKGROUND`` off (the tests), it is
written at once on the caller's connection.

Records older than ``ACCESS_LOG_DAYS`` days are deleted by the daily job
(``prune``). A redaction scrubs the query preview of every record that
delivered a redacted version or quotes its text (``scrub_for_redaction``);
the memory ids stay, so the memory's page still says where it went.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import connection, models
from django.utils import timezone

from memories.rules import REDACTED_CONTENT
from timothy.concurrency import ThreadPool, must_run_inline

logger = logging.getLogger(__name__)

PREVIEW_WORDS = 8
PREVIEW_CHARS = 80
ELLIPSIS = "…"


class AccessRecord(models.Model):
    """One search answered for an assistant: who asked, when, and what it got."""

    class Source(models.TextChoices):
        API = "api", "API token"
        SERVICE = "service", "Chat service (internal)"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.PROTECT, related_name="access_records"
    )
    # The token that searched; null for the internal surface (the service token).
    token = models.ForeignKey(
        "memories.ApiToken",
        models.PROTECT,
        null=True,
        blank=True,
        related_name="access_records",
    )
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    # The memories packed into the block, best first.
    memory_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    at = models.DateTimeField(default=timezone.now)
    query_preview = models.CharField(max_length=PREVIEW_CHARS, blank=True, default="")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-at"], name="access_owner_at"),
            models.Index(fields=["token", "-at"], name="access_token_at"),
            models.Index(fields=["at"], name="access_at"),
            GinIndex(fields=["memory_ids"], name="access_memory_ids"),
        ]

    def __str__(self) -> str:
        return f"{self.source} {self.token_id or ''} at {self.at:%Y-%m-%d %H:%M}"

    @property
    def preview_redacted(self) -> bool:
        return self.query_preview == REDACTED_CONTENT


def preview_of(query: str) -> str:
    """The query's first words: at most PREVIEW_WORDS words and PREVIEW_CHARS characters."""
    words = str(query or "").split()
    text = " ".join(words[:PREVIEW_WORDS])
    cut = len(words) > PREVIEW_WORDS
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1].rstrip()
        cut = True
    if cut:
        text = text[: PREVIEW_CHARS - 1].rstrip() + ELLIPSIS
    return text


# --- writing -------------------------------------------------------------------------


def record_search(owner, token, query: str, answer: dict, *, source: str) -> None:
    """Log that ``token`` (None: the chat service) got the memories of ``answer``.

    ``answer`` is the search answer's body (``RecallResult.to_dict``). Written
    after the answer, off the caller's turn (see the module's docstring); a
    failure is logged, never raised to the caller.
    """
    ids = [item["id"] for item in answer.get("memories", ()) if item.get("id") is not None]
    values = {
        "owner_id": owner.pk,
        "token_id": getattr(token, "pk", None),
        "source": source,
        "memory_ids": ids,
        "at": timezone.now(),
        "query_preview": preview_of(query),
    }
    if must_run_inline() or not settings.STAMP_IN_BACKGROUND:
        _write([values])
    else:
        with _pending_lock:
            _pending.append(values)
        _writer.submit(_write_in_background)


def _write(rows: list[dict]) -> None:
    """One INSERT of ``rows``, written directly: the ORM's ``bulk_create`` cost
    about 0.6 ms of the web worker's CPU more for each search's record."""
    columns, one_row = _insert_parts()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {AccessRecord._meta.db_table} ({columns}) VALUES "
            + ", ".join([one_row] * len(rows)),
            [values[name] for values in rows for name in _COLUMNS],
        )


# What a record's row holds, in the INSERT's order (the id comes from its sequence).
_COLUMNS = ("owner_id", "token_id", "source", "memory_ids", "at", "query_preview")


@functools.cache
def _insert_parts() -> tuple[str, str]:
    quote = connection.ops.quote_name
    fields = [AccessRecord._meta.get_field(name) for name in _COLUMNS]
    columns = ", ".join(quote(field.column) for field in fields)
    one_row = "(" + ", ".join("%s::bigint[]" if f.name == "memory_ids" else "%s" for f in fields)
    return columns, one_row + ")"


# Records waiting for the writer thread. Each search queues one and a turn of
# the writer; a turn writes every record waiting in one statement, so under
# load many searches cost one insert and one commit, and the turns queued
# behind it find nothing left to do.
_pending: list[dict] = []
_pending_lock = threading.Lock()


def _write_in_background() -> None:
    with _pending_lock:
        rows = _pending[:]
        _pending.clear()
    if not rows:
        return
    try:
        _write(rows)
        return
    except Exception:
        if len(rows) == 1:
            logger.exception("could not write the access record of a search")
            return
    # One bad record (its token deleted meanwhile, say) costs only itself.
    for values in rows:
        try:
            _write([values])
        except Exception:
            logger.exception("could not write the access record of a search")


_writer = ThreadPool("access-log", 1)


def drain() -> None:
    """Wait until every record queued so far is written."""
    _writer.drain()


# --- reading -------------------------------------------------------------------------


@dataclass
class Delivery:
    """How often one token (or the chat service) received a memory."""

    token_id: int | None
    token_name: str
    source: str
    times: int
    last: datetime


def deliveries_of(owner, memory_id: int) -> list[Delivery]:
    """Per token, how many searches delivered ``memory_id`` and the latest, most first."""
    rows = (
        AccessRecord.objects.filter(owner=owner, memory_ids__contains=[memory_id])
        .values("token_id", "token__name", "source")
        .annotate(times=models.Count("id"), last=models.Max("at"))
        .order_by("-times", "-last")
    )
    return [
        Delivery(
            token_id=row["token_id"],
            token_name=(
                (row["token__name"] or "(unnamed)")
                if row["token_id"]
                else AccessRecord.Source(row["source"]).label
            ),
            source=row["source"],
            times=row["times"],
            last=row["last"],
        )
        for row in rows
    ]


# --- keeping it bounded and clean ----------------------------------------------------


def prune(now: datetime | None = None) -> int:
    """Delete records older than ACCESS_LOG_DAYS days; how many went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.ACCESS_LOG_DAYS)
    deleted, _ = AccessRecord.objects.filter(at__lt=cutoff).delete()
    return deleted


def scrub_for_redaction(owner_id: int, ids: Sequence[int], needles: Sequence[str]) -> list[str]:
    """Replace the query preview of the owner's records that delivered one of the
    redacted versions ``ids``, or whose preview contains one of ``needles``
    (lower-cased texts), with the stub. The tables touched (for vacuum)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {AccessRecord._meta.db_table} AS r SET query_preview = %(stub)s
            WHERE r.owner_id = %(owner)s AND r.query_preview <> %(stub)s
              AND r.query_preview <> ''
              AND (r.memory_ids && %(ids)s::bigint[] OR EXISTS (
                SELECT 1 FROM unnest(%(needles)s::text[]) AS n
                WHERE strpos(lower(r.query_preview), n) > 0))
            """,
            {
                "stub": REDACTED_CONTENT,
                "owner": owner_id,
                "ids": list(ids),
                "needles": list(needles),
            },
        )
        changed = cursor.rowcount
    return [AccessRecord._meta.db_table] if changed else []
