"""Memories 0020 adds each vector's half-precision copy and moves the exact
scan's covering index onto it; going back restores retrieval 0005's index."""

from __future__ import annotations

import pytest
from django.db import connection

from memories.models import Memory
from retrieval.index import vector_index_state
from tests.base import has_column, migrate_to
from tests.retrieval.helpers import vector

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = "0019_hnsw_ef_construction_96"


def _covering_index() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_active_embeddings'"
        )
        return cursor.fetchone()[0]


def test_the_half_precision_copy_migrates_both_ways(alice):
    memory = Memory.objects.create(
        owner=alice, type="semantic", content="x", status="active", embedding=vector((0, 1.0))
    )
    try:
        migrate_to("memories", BEFORE)
        assert not has_column("memories_memory", "embedding_half")
        assert "INCLUDE (id, type, embedding)" in _covering_index()
        with connection.cursor() as cursor:
            # A vector written while the copy did not exist.
            cursor.execute(
                "UPDATE memories_memory SET embedding = %s::vector WHERE id = %s",
                [str([3.0, 4.0] + [0.0] * (len(memory.embedding) - 2)), memory.pk],
            )
    finally:
        # Where every later test expects the schema: the latest migration.
        migrate_to("memories")
    assert has_column("memories_memory", "embedding_half")
    assert "INCLUDE (id, type, embedding_half)" in _covering_index()
    assert vector_index_state() == "live"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (embedding_half::real[])[1:3] FROM memories_memory WHERE id = %s", [memory.pk]
        )
        # Unit length, each value rounded to half precision.
        assert cursor.fetchone()[0] == pytest.approx([0.6, 0.8, 0.0], abs=2**-11)
