"""Giving memories their vectors in batches.

``reembed()`` is what ``manage.py reembed`` runs; ``embed_rows()`` is the loop it
shares with the embedding catch-up (``memories.tasks.embed_missing``). Each
batch is one provider call and one short transaction, so the service keeps
running and an interrupted run resumes after the last id it stored.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from memories.about import SET_BY_RULES, about_fields, refined
from memories.models import Memory
from memories.vectors import vector_text
from retrieval.embeddings import (
    EmbeddingError,
    EmbeddingProvider,
    column_dimensions,
    get_provider,
)
from retrieval.index import resize_embedding_column, resume_vector_index, vector_index_paused

# Rows that can come back into retrieval: active now, or once confirmed.
EMBEDDED_STATUSES = (Memory.Status.ACTIVE, Memory.Status.PROPOSED)
# Rows per provider call and per transaction in reembed. The local model sorts
# the texts of a call by length and encodes them 64 at a time: the more texts
# it can sort, the less padding it computes (512 rows: 1.7× as many memories a
# second as 64, docs/benchmarks.md).
REEMBED_BATCH_ROWS = 512


class ReembedRefused(Exception):
    """Nothing was embedded: no provider, or a model and settings that disagree."""


class EmbeddingStopped(Exception):
    """The provider or the database failed part-way (or the run was interrupted);
    every row up to ``last_id`` is stored."""

    def __init__(
        self, last_id: int, embedded: int, missing_only: bool, cause: BaseException
    ) -> None:
        super().__init__(str(cause).strip())
        self.last_id = last_id
        self.embedded = embedded
        self.missing_only = missing_only
        self.cause = cause

    def resume_hint(self) -> str:
        return f"Resume with --start-after {self.last_id}" + (
            " --missing-only." if self.missing_only else "."
        )


@dataclass
class Reembedded:
    provider: EmbeddingProvider
    embedded: int
    seconds: float
    # Seconds spent building the vector index afterwards; None: it stayed live.
    index_seconds: float | None
    # The column's dimension before a conversion; None: no conversion.
    converted_from: int | None = None


def reembed(
    *,
    owner=None,
    missing_only: bool = False,
    start_after: int = 0,
    batch_size: int | None = None,
    threads: int | None = None,
    report: Callable[[str], None] = lambda line: None,
    progress: Callable[[int, int], None] = lambda stored, total: None,
) -> Reembedded:
    """(Re)compute the vectors of active and proposed memories, oldest id first.

    Converts the vector column first when the configured model's dimension
    differs from the stored one (every vector is then recomputed). Raises
    ``ReembedRefused`` before writing anything, ``EmbeddingStopped`` after a
    failed batch (resume with ``start_after=error.last_id``). ``progress`` is
    called after each batch with its size and the number of rows to embed.
    ``batch_size`` is rows per provider call and per transaction (default
    ``REEMBED_BATCH_ROWS``); ``threads`` the local model's threads (default
    ``TIMOTHY_EMBEDDING_THREADS``).
    """
    provider = get_provider(threads=threads, bulk=True)
    if provider is None:
        raise ReembedRefused(
            "No embedding provider is configured (TIMOTHY_EMBEDDING_PROVIDER=none); "
            "nothing to embed with."
        )
    if provider.dimensions != settings.EMBEDDING_DIMENSIONS:
        raise ReembedRefused(
            f"The embedding model gives {provider.dimensions}-dimensional vectors but "
            f"TIMOTHY_EMBEDDING_DIMENSIONS is {settings.EMBEDDING_DIMENSIONS}; set it to "
            f"{provider.dimensions} and run reembed again."
        )
    stored = column_dimensions()
    converted_from = None
    if stored != provider.dimensions:
        if owner is not None:
            raise ReembedRefused(
                f"The database stores {stored}-dimensional embeddings and the model gives "
                f"{provider.dimensions}; converting affects every owner, so run reembed "
                "without --owner."
            )
        report(
            f"Converting the embedding column from {stored} to {provider.dimensions} "
            "dimensions; every stored vector is dropped and recomputed."
        )
        resize_embedding_column(provider.dimensions)
        missing_only = True
        converted_from = stored

    rows = Memory.objects.filter(status__in=EMBEDDED_STATUSES, pk__gt=start_after)
    if owner is not None:
        rows = rows.for_owner(owner)
    if missing_only:
        rows = rows.filter(embedding__isnull=True)
    total = rows.count()
    active = rows.filter(status=Memory.Status.ACTIVE).count()
    started = time.perf_counter()
    # Many new vectors: the HNSW graph is built once afterwards rather than
    # searched once per row (retrieval/index.py).
    with vector_index_paused(active, report=report) as index:
        embedded = embed_rows(
            provider,
            rows,
            batch_size=batch_size or REEMBED_BATCH_ROWS,
            missing_only=missing_only,
            start_after=start_after,
            on_batch=lambda count: progress(count, total),
        )
    # A run (or an import) interrupted while the graph was paused left it
    # missing; any later reembed — `make run` queues one at every start —
    # builds it again.
    built = index["index_seconds"] or resume_vector_index()
    return Reembedded(
        provider=provider,
        embedded=embedded,
        seconds=time.perf_counter() - started,
        index_seconds=built,
        converted_from=converted_from,
    )


def embed_rows(
    provider: EmbeddingProvider,
    rows,
    *,
    batch_size: int,
    missing_only: bool,
    start_after: int = 0,
    on_batch: Callable[[int], None] = lambda count: None,
) -> int:
    """Embed ``rows`` (a Memory queryset) in id order; how many were stored.

    With ``missing_only`` a row that got a vector meanwhile (its own task ran)
    keeps it.
    """
    embedded = 0
    last_id = start_after
    while True:
        try:
            batch = list(
                rows.filter(pk__gt=last_id)
                .order_by("pk")
                .values_list("pk", "owner_id", "content")[:batch_size]
            )
            if not batch:
                return embedded
            vectors = provider.embed([content for _, _, content in batch])
            store_vectors(batch, vectors, missing_only)
        except (EmbeddingError, DatabaseError, KeyboardInterrupt) as error:
            raise EmbeddingStopped(last_id, embedded, missing_only, error) from error
        last_id = batch[-1][0]
        embedded += len(batch)
        on_batch(len(batch))


def store_vectors(
    batch: list[tuple[int, int, str]], vectors: list[list[float]], missing_only: bool
) -> None:
    condition = " AND m.embedding IS NULL" if missing_only else ""
    # One statement per batch: the table's statement-level triggers run once.
    # The owner is named with each id, so that a table sharded by owner
    # (docs/scaling.md) finds each row in its own shard.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Memory._meta.db_table} AS m SET embedding = v.embedding::vector "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS v(id, owner_id, embedding) "
            "WHERE m.id = v.id AND m.owner_id = v.owner_id" + condition,
            [
                [memory_id for memory_id, _, _ in batch],
                [owner_id for _, owner_id, _ in batch],
                [vector_text(vector) for vector in vectors],
            ],
        )


def refine_about(memory_id: int, vector, provider) -> bool:
    """Give a memory the aspect its meaning names, where the rules named none
    (memories/about.py ``refined``); an about the owner set stays. True when
    one was written."""
    row = (
        Memory.objects.filter(pk=memory_id, about_set_by__in=["", SET_BY_RULES])
        .exclude(status=Memory.Status.REDACTED)
        .defer("embedding", "tsv")
        .first()
    )
    if row is None:
        return False
    about = row.about
    better = refined(about, row.type, vector, provider)
    if better == about and row.about_kind:
        return False
    return bool(Memory.objects.filter(pk=memory_id).update(**about_fields(better)))
