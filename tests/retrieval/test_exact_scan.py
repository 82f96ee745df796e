"""The vector leg's exact scan reads the covering index (retrieval 0005).

The index must change how the owner's vectors are read, never which memories
come back: the leg returns the 30 nearest of the owner's active memories
existing at ``as_of``, of the requested types, as a plain scan of the rows does.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory
from retrieval.legs import LegRequest, vector_leg
from retrieval.vectors import vector_text
from tests.retrieval.helpers import vector

pytestmark = pytest.mark.django_db(transaction=True)


def _fill(owners, rows_each: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    now = timezone.now()
    statuses = ["active"] * 8 + ["archived", "proposed"]
    types = ["semantic", "preference", "episodic", "reflection"]
    Memory.objects.bulk_create(
        Memory(
            owner=owner,
            type=rng.choice(types),
            content=f"row {i}",
            status=rng.choice(statuses),
            # Twelve distinct vectors: many exact ties in distance, broken by id.
            embedding=None
            if i % 17 == 0
            else vector((rng.randrange(6), 1.0), (6, rng.choice((0.0, 0.5)))),
            created_at=now - timedelta(days=rng.randrange(60)),
        )
        for i in range(rows_each)
        for owner in owners
    )
    with connection.cursor() as cursor:
        # Index-only scans need the visibility map; the planner reads it from here.
        cursor.execute("VACUUM ANALYZE memories_memory")


def _owner(index: int):
    return get_user_model().objects.create_user(f"owner{index}")


def _heap_nearest(request: LegRequest, embedding: list[float]) -> list[int]:
    """The same nearest memories read from the rows themselves, by a sequential scan."""
    sql = (
        "SELECT id FROM memories_memory WHERE owner_id = %s AND status = 'active' "
        "AND created_at <= %s AND embedding IS NOT NULL"
    )
    params: list = [request.owner_id, request.as_of]
    if request.types:
        sql += " AND type = ANY(%s)"
        params.append(list(request.types))
    sql += " ORDER BY embedding <=> %s::vector, id LIMIT %s"
    params += [vector_text(embedding), request.limit]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("SET LOCAL enable_indexonlyscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        assert "Seq Scan on memories_memory" in "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _request(owner, embedding, **kwargs) -> LegRequest:
    kwargs.setdefault("as_of", timezone.now())
    return LegRequest(owner_id=owner.pk, query="", query_embedding=tuple(embedding), **kwargs)


def _exact(request: LegRequest) -> list[int]:
    with connection.cursor() as cursor:
        return [memory_id for memory_id, _ in vector_leg(cursor, request)]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"types": ("semantic", "episodic")},
        {"as_of": timezone.now() - timedelta(days=30)},
    ],
)
def test_the_exact_scan_returns_what_the_rows_say(alice, bob, options):
    _fill([alice, bob], 400)
    for direction in range(4):
        embedding = vector((direction, 1.0), (6, 0.5))
        request = _request(alice, embedding, **options)
        found = _exact(request)
        assert len(found) == 30
        assert found == _heap_nearest(request, embedding)


def test_the_exact_scan_reads_only_the_covering_index(alice, bob):
    # Enough of other owners' rows that reading the whole table costs more.
    _fill([alice, bob, *(_owner(i) for i in range(9))], 400)
    request = _request(alice, vector((0, 1.0)))
    with CaptureQueriesContext(connection) as queries:
        assert len(_exact(request)) == 30
    sql = queries.captured_queries[-1]["sql"]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, VERBOSE, COSTS OFF) " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using memory_active_embeddings" in plan
    # One distance a row: the score and the sort key are the same column.
    assert plan.count("<=>") == 1
    assert "Heap Fetches: 0" in plan
    assert "top-N heapsort" in plan  # the 30 nearest kept as they come
    assert "memory_embedding_hnsw" not in plan
