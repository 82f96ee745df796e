"""Background jobs (django-q2): each a few lines over the functions that do the work."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.dispatch import receiver
from django.utils import timezone

from memories import about_llm, extraction, llm
from memories.models import Memory
from memories.signals import memory_written
from retrieval.batch_embed import EmbeddingStopped, embed_rows, refine_about
from retrieval.embeddings import EmbeddingError, get_provider

logger = logging.getLogger(__name__)

# The scheduled catch-up leaves memories younger than this to their own
# embedding task, which is most likely still queued.
CATCH_UP_GRACE = timedelta(minutes=1)
# pg_try_advisory_lock key: one embedding catch-up at a time.
CATCH_UP_LOCK = 0x7469_6D65  # "time"


def embed_memory(memory_id: int) -> bool:
    """Compute a memory's embedding if it has none; True when one was stored.

    A failing provider is logged and leaves the memory without a vector: it is
    still found by text and entity, and the catch-up (every minute) or
    `reembed --missing-only` gives it one later.
    """
    provider = get_provider()
    if provider is None:
        return False
    unembedded = Memory.objects.filter(pk=memory_id, embedding__isnull=True).exclude(
        status=Memory.Status.REDACTED
    )
    row = unembedded.values("content").first()
    if row is None:
        return False
    try:
        [vector] = provider.embed([row["content"]])
    except EmbeddingError as error:
        logger.warning("Could not embed memory %s: %s", memory_id, error)
        return False
    try:
        with transaction.atomic():
            # Not if it was redacted meanwhile: the vector is of the erased text.
            stored = unembedded.update(embedding=vector)
            if stored:
                refine_about(memory_id, vector, provider)
    except DatabaseError as error:
        logger.error("Could not store the embedding of memory %s: %s", memory_id, error)
        return False
    return stored == 1


def read_about_with_llm(memory_id: int) -> bool:
    """Have the LLM read what a written memory is about (``TIMOTHY_ABOUT_LLM``);
    True when its reading was kept. A failing LLM is logged and leaves the
    rules' reading."""
    try:
        return about_llm.read_stored(memory_id)
    except llm.LLMError as error:
        logger.warning("The LLM could not read what memory %s is about: %s", memory_id, error)
        return False


def vacuum_after_redaction(tables: list[str]) -> str:
    """VACUUM the tables a redaction touched, so the old row versions holding the
    text are removed (memories/redaction.py)."""
    from memories.redaction import vacuum

    vacuum(tables)
    return f"vacuumed {', '.join(tables)}"


def erase_from_disk(erase_id: int) -> str:
    """Erase what redactions left in the database's files and WAL (memories/disk_erase.py)."""
    from memories.disk_erase import run

    return run(erase_id)


def extract_conversation(owner_id: int, session_id: str, phase: str, turns: list[dict]) -> int:
    """Propose the facts of one conversation; the number of memories written."""
    owner = get_user_model().objects.get(pk=owner_id)
    parsed = [extraction.Turn(t["role"], t["content"], t.get("at")) for t in turns]
    try:
        result = extraction.extract(owner, session_id, phase, parsed)
    except llm.LLMError as error:
        logger.warning("Extraction for session %s (%s) failed: %s", session_id, phase, error)
        return 0
    logger.info(
        "Extraction for session %s (%s) proposed %d, skipped %d already held",
        session_id,
        phase,
        len(result.written),
        len(result.skipped),
    )
    return len(result.written)


def daily_maintenance() -> str:
    """The daily schedule: consolidate every owner's memories, forget expired
    idempotency keys, fold the BM25 corpus changes; the consolidation's summary."""
    from memories.consolidation import consolidate
    from memories.idempotency_records import forget_expired_keys
    from retrieval.bm25 import compact_corpus_sums

    _, outcome = consolidate()
    summary = outcome.summary()
    logger.info("Consolidation: %s", summary)
    forgotten = forget_expired_keys()
    if forgotten:
        logger.info("Forgot %d expired idempotency keys", forgotten)
    from memories.access_log import prune

    pruned = prune()
    if pruned:
        logger.info("Pruned %d access records past TIMOTHY_ACCESS_LOG_DAYS", pruned)
    compact_corpus_sums()
    erase_uncovered_redactions()
    return summary


def erase_uncovered_redactions() -> str:
    """Run an erase from disk when a redaction (or a request) is not covered yet, so
    that none waits longer than a day; part of the daily job."""
    from memories.disk_erase import DiskErase, request_erase, run, uncovered_redactions

    waiting = DiskErase.objects.filter(
        state__in=[DiskErase.State.REQUESTED, DiskErase.State.RUNNING]
    ).first()
    if waiting is None and not uncovered_redactions():
        return "nothing to erase from disk"
    erase = waiting or request_erase(via="schedule")
    return run(erase.pk)


# The schedule's function before it was named for all it does: a task queued
# under the old name (before migration 0012 renamed the schedule) still runs.
consolidate_daily = daily_maintenance


def embed_missing(min_age: timedelta = timedelta(0)) -> str:
    """Give a vector to every active or proposed memory that has none and was
    written at least ``min_age`` ago; a one-line summary.

    Catches up on embedding tasks that were lost (a worker killed while it held
    one, a database stop while it stored the vector) and on imports, which
    queue none. `make run` queues it at every start; ``catch_up_embeddings``
    runs it every minute. One run at a time: a second one returns at once.
    """
    provider = get_provider()
    if provider is None:
        return "no embedding provider"
    with _advisory_lock(CATCH_UP_LOCK) as alone:
        if not alone:
            return "another embedding catch-up is running"
        cutoff = timezone.now() - min_age
        waiting = Memory.objects.awaiting_embedding().filter(created_at__lte=cutoff)
        total = waiting.count()
        error = ""
        try:
            embedded = embed_rows(
                provider, waiting, batch_size=settings.EMBEDDING_BATCH_SIZE, missing_only=True
            )
        except EmbeddingStopped as stop:
            embedded, error = stop.embedded, str(stop)
    if not total:
        return "no memory is waiting for a vector"
    summary = f"{total} waiting for a vector, {embedded} embedded"
    if error:
        summary += f", then stopped ({error}); the next run continues"
        logger.warning("Embedding catch-up: %s", summary)
    else:
        logger.info("Embedding catch-up: %s", summary)
    return summary


def catch_up_embeddings() -> str:
    """The scheduled catch-up (every minute): memories older than the grace,
    whose own embedding task would have run by now."""
    return embed_missing(min_age=CATCH_UP_GRACE)


@contextmanager
def _advisory_lock(key: int) -> Iterator[bool]:
    """A PostgreSQL session lock: True if we hold it. A worker that dies loses
    its session, and the lock with it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        held = cursor.fetchone()[0]
    try:
        yield held
    finally:
        if held:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
            except DatabaseError:
                pass  # the session is gone, and its lock with it


# The memory this thread wrote with its vector, in the transaction still open
# (``vector_stored``): its commit queues no embedding task.
_with_vector = threading.local()


def vector_stored(memory_id: int) -> None:
    """The caller stored ``memory_id``'s vector in the transaction that writes the
    row (the API's create computes it to compare with the owner's memories): when
    that transaction commits, ``queue_embedding`` queues no task for it. A
    thread writes one such memory at a time, so this replaces any earlier one
    (whose transaction has ended, committed or not)."""
    _with_vector.memory_id = memory_id


@receiver(memory_written, dispatch_uid="memories.tasks.queue_embedding")
def queue_embedding(sender, memory_id: int, **kwargs) -> None:
    """A new row gets its vector in the background; the write never waits or fails for it.

    Not for a row written with its vector (``vector_stored``): the task would
    only find it done, at the cost of a queue insert, a poll and a run.
    """
    if getattr(_with_vector, "memory_id", None) == memory_id:
        _with_vector.memory_id = None
        return
    try:
        if get_provider() is None:
            return
        from django_q.tasks import async_task

        async_task("memories.tasks.embed_memory", memory_id)
    except Exception:
        logger.exception("Could not queue the embedding of memory %s", memory_id)


@receiver(memory_written, dispatch_uid="memories.tasks.queue_about_reading")
def queue_about_reading(sender, memory_id: int, **kwargs) -> None:
    """Where the LLM reads abouts (``TIMOTHY_ABOUT_LLM``), a new row is read in the
    background; the write never waits or fails for it."""
    if not about_llm.is_enabled():
        return
    try:
        from django_q.tasks import async_task

        async_task("memories.tasks.read_about_with_llm", memory_id)
    except Exception:
        logger.exception("Could not queue the LLM's reading of memory %s", memory_id)
