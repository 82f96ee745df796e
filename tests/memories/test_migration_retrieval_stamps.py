"""Memories 0021 moves recall's stamps off the memory rows into their own
table, the stamps already written with them; going back puts them on the rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval.models import RetrievalStamp
from tests.base import has_column, make_memory, migrate_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = "0020_embedding_half"


def _column_stamps() -> dict[int, object]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, last_retrieved_at FROM memories_memory ORDER BY id")
        return dict(cursor.fetchall())


def test_the_stamps_migrate_both_ways(alice, bob):
    then = timezone.now() - timedelta(days=3)
    stamped = make_memory(alice, "Alice climbs on Tuesdays.", last_retrieved_at=then)
    never = make_memory(alice, "Alice keeps bees.")
    later = make_memory(bob, "Bob sails.")
    try:
        migrate_to("memories", BEFORE)
        assert has_column("memories_memory", "last_retrieved_at")
        assert _column_stamps() == {stamped.pk: then, never.pk: None, later.pk: None}
        with connection.cursor() as cursor:
            # A stamp written on the row, as recall wrote them before 0021.
            cursor.execute(
                "UPDATE memories_memory SET last_retrieved_at = %s WHERE id = %s",
                [then + timedelta(days=1), later.pk],
            )
    finally:
        # Where every later test expects the schema: the latest migration.
        migrate_to("memories")
    assert not has_column("memories_memory", "last_retrieved_at")
    stamps = {s.memory_id: (s.owner_id, s.last_retrieved_at) for s in RetrievalStamp.objects.all()}
    assert stamps == {stamped.pk: (alice.pk, then), later.pk: (bob.pk, then + timedelta(days=1))}
    memories = Memory.objects.select_related("retrieval_stamp").in_bulk()
    assert memories[never.pk].last_retrieved_at is None
    assert memories[later.pk].last_retrieved_at == then + timedelta(days=1)
