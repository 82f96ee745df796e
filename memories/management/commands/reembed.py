"""`python manage.py reembed`: (re)compute stored embeddings in batches.

Converts the vector column first when the configured model's dimension differs
from the stored one. Each batch is its own short transaction, so the service
keeps running; an interrupted run continues with ``--missing-only`` (after a
conversion) or ``--start-after`` (the id it printed).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import connection, transaction
from pgvector import Vector
from tqdm import tqdm

from memories.management.base import SchemaCommand
from memories.models import Memory
from retrieval.embeddings import (
    EmbeddingError,
    column_dimensions,
    get_provider,
    resize_embedding_column,
)
from retrieval.index import resume_vector_index, vector_index_paused

# Rows that can come back into retrieval: active now, or once confirmed.
EMBEDDED_STATUSES = (Memory.Status.ACTIVE, Memory.Status.PROPOSED)


class Command(SchemaCommand):
    help = "Re-embed memories in batches (converts the vector column if the dimension changed)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--owner", help="Only this owner's memories (username).")
        parser.add_argument(
            "--missing-only", action="store_true", help="Only memories without an embedding."
        )
        parser.add_argument(
            "--start-after", type=int, default=0, help="Skip memories up to this id (resume)."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=settings.EMBEDDING_BATCH_SIZE,
            help="Memories per provider call and per transaction.",
        )

    def handle(self, *args, **options) -> None:
        provider = get_provider()
        if provider is None:
            raise CommandError(
                "No embedding provider is configured (TIMOTHY_EMBEDDING_PROVIDER=none); "
                "nothing to embed with."
            )
        if provider.dimensions != settings.EMBEDDING_DIMENSIONS:
            raise CommandError(
                f"The embedding model gives {provider.dimensions}-dimensional vectors but "
                f"TIMOTHY_EMBEDDING_DIMENSIONS is {settings.EMBEDDING_DIMENSIONS}; set it to "
                f"{provider.dimensions} and run reembed again."
            )
        owner = self.owner(options["owner"])
        missing_only = options["missing_only"]
        stored = column_dimensions()
        if stored != provider.dimensions:
            if owner is not None:
                raise CommandError(
                    f"The database stores {stored}-dimensional embeddings and the model gives "
                    f"{provider.dimensions}; converting affects every owner, so run reembed "
                    "without --owner."
                )
            self.stdout.write(
                f"Converting the embedding column from {stored} to {provider.dimensions} "
                "dimensions; every stored vector is dropped and recomputed."
            )
            resize_embedding_column(provider.dimensions)
            missing_only = True
        self.reembed(provider, owner, missing_only, options["start_after"], options["batch_size"])

    def owner(self, username: str | None):
        if not username:
            return None
        try:
            return get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No owner named {username!r}.")

    def reembed(self, provider, owner, missing_only: bool, start_after: int, batch_size: int):
        rows = Memory.objects.filter(status__in=EMBEDDED_STATUSES, pk__gt=start_after)
        if owner is not None:
            rows = rows.for_owner(owner)
        if missing_only:
            rows = rows.filter(embedding__isnull=True)
        rows = rows.order_by("pk")
        total = rows.count()
        active = rows.filter(status=Memory.Status.ACTIVE).count()
        started = time.perf_counter()
        # Many new vectors: the HNSW graph is built once afterwards rather than
        # searched once per row (retrieval/index.py).
        with vector_index_paused(active, report=self.stdout.write) as index:
            done = self.embed_rows(provider, rows, total, missing_only, start_after, batch_size)
        # A run (or an import) interrupted while the graph was paused left it
        # missing; any later reembed — `make run` queues one at every start —
        # builds it again.
        built = index["index_seconds"] or resume_vector_index()
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"Embedded {done} memories with {provider!r} in {seconds:.1f} s"
            + (f" (of which {built:.1f} s building the vector index)." if built else ".")
        )

    def embed_rows(
        self, provider, rows, total: int, missing_only: bool, start_after: int, batch_size: int
    ) -> int:
        done = 0
        last_id = start_after
        bar = tqdm(total=total, unit="memory", desc="Embedding", file=self.stderr._out)
        try:
            while True:
                batch = list(
                    rows.filter(pk__gt=last_id).values_list("pk", "owner_id", "content")[
                        :batch_size
                    ]
                )
                if not batch:
                    break
                try:
                    vectors = provider.embed([content for _, _, content in batch])
                except EmbeddingError as error:
                    raise CommandError(
                        f"The embedding provider failed after memory #{last_id}: {error} "
                        f"Resume with --start-after {last_id}"
                        + (" --missing-only." if missing_only else ".")
                    )
                self.store(batch, vectors, missing_only)
                last_id = batch[-1][0]
                done += len(batch)
                bar.update(len(batch))
        except KeyboardInterrupt:
            bar.close()
            raise CommandError(
                f"Interrupted after memory #{last_id}; resume with --start-after {last_id}"
                + (" --missing-only." if missing_only else ".")
            )
        bar.close()
        return done

    @staticmethod
    def store(batch: list[tuple[int, int, str]], vectors: list[list[float]], missing_only: bool):
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
                    [Vector._to_db(vector) for vector in vectors],
                ],
            )
