"""Helpers for building test data."""

from __future__ import annotations

from datetime import datetime

from memories.models import Memory
from retrieval.models import RetrievalStamp


def make_memory(
    owner,
    content: str = "Alice prefers aisle seats on long flights.",
    type: str = Memory.Type.SEMANTIC,
    *,
    status: str = Memory.Status.ACTIVE,
    entities: list[str] | None = None,
    confidence: float = 0.9,
    created_at: datetime | None = None,
    last_confirmed_at: datetime | None = None,
    embedding: list[float] | None = None,
    last_retrieved_at: datetime | None = None,
    **extra,
) -> Memory:
    """Create a memory directly in the given state (no events), for test set-up;
    ``last_retrieved_at`` writes its retrieval stamp too."""
    fields = dict(
        owner=owner,
        content=content,
        type=type,
        status=status,
        entity_refs=entities or [],
        confidence=confidence,
        embedding=embedding,
        **extra,
    )
    if created_at is not None:
        fields["created_at"] = created_at
    if last_confirmed_at is not None:
        fields["last_confirmed_at"] = last_confirmed_at
    elif status == Memory.Status.ACTIVE:
        fields["last_confirmed_at"] = fields.get("created_at")
    memory = Memory.objects.create(**fields)
    if last_retrieved_at is not None:
        stamp(memory, last_retrieved_at)
    return memory


def stamp(memory: Memory, last_retrieved_at: datetime) -> RetrievalStamp:
    """Record that recall packed ``memory`` at ``last_retrieved_at``, as recall would."""
    written, _ = RetrievalStamp.objects.update_or_create(
        memory=memory,
        defaults={"owner_id": memory.owner_id, "last_retrieved_at": last_retrieved_at},
    )
    RetrievalStamp.attach(memory, last_retrieved_at)
    return written


def migrate_to(app: str, name: str | None = None) -> None:
    """Migrate ``app`` to the migration ``name``, forwards or backwards, as
    ``manage.py migrate`` would (for migration tests). Without ``name``, every
    app goes to its latest: going back unapplied the other apps' migrations
    that depend on ``app``'s (retrieval 0009 on memories 0027), and they come
    back too."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    targets = [(app, name)] if name else executor.loader.graph.leaf_nodes()
    executor.migrate(targets)


def has_column(table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` now (a dropped one does not count)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attname = %s AND NOT attisdropped",
            [table, column],
        )
        return cursor.fetchone()[0] == 1
