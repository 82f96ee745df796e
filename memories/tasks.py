"""Background jobs (django-q2): each a few lines over the functions that do the work."""

from __future__ import annotations

import io
import logging

from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.dispatch import receiver

from memories import extraction, llm
from memories.models import Memory
from memories.signals import memory_written
from retrieval.embeddings import EmbeddingError, get_provider

logger = logging.getLogger(__name__)


def embed_memory(memory_id: int) -> bool:
    """Compute a memory's embedding if it has none; True when one was stored.

    A failing provider is logged and leaves the memory without a vector: it is
    still found by text and entity, and `reembed --missing-only` catches up.
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
    except DatabaseError as error:
        logger.error("Could not store the embedding of memory %s: %s", memory_id, error)
        return False
    return stored == 1


def vacuum_after_redaction(tables: list[str]) -> str:
    """VACUUM the tables a redaction touched, so the old row versions holding the
    text are removed (memories/redaction.py)."""
    from memories.redaction import vacuum

    vacuum(tables)
    return f"vacuumed {', '.join(tables)}"


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


def consolidate_daily() -> str:
    """The scheduled consolidation of every owner's memories; then forgetting
    expired idempotency keys and folding the BM25 corpus changes."""
    from memories.consolidation import consolidate
    from memories.idempotency import forget_expired_keys
    from retrieval.bm25 import compact_corpus_sums

    _, outcome = consolidate()
    summary = outcome.summary()
    logger.info("Consolidation: %s", summary)
    forgotten = forget_expired_keys()
    if forgotten:
        logger.info("Forgot %d expired idempotency keys", forgotten)
    compact_corpus_sums()
    return summary


def embed_missing() -> str:
    """Give a vector to every active or proposed memory that has none.

    Catches up on embedding tasks lost to a restart (a task the worker had
    claimed when it stopped) and on imports, which queue none. `make run`
    queues it at every start.
    """
    from django.core.management import call_command

    if get_provider() is None:
        return "no embedding provider"
    out = io.StringIO()
    call_command("reembed", "--missing-only", stdout=out, stderr=io.StringIO())
    summary = out.getvalue().strip().splitlines()[-1] if out.getvalue().strip() else ""
    logger.info("Embedding catch-up: %s", summary)
    return summary


@receiver(memory_written, dispatch_uid="memories.tasks.queue_embedding")
def queue_embedding(sender, memory_id: int, **kwargs) -> None:
    """A new row gets its vector in the background; the write never waits or fails for it."""
    try:
        if get_provider() is None:
            return
        from django_q.tasks import async_task

        async_task("memories.tasks.embed_memory", memory_id)
    except Exception:
        logger.exception("Could not queue the embedding of memory %s", memory_id)
