"""The vector leg's exact scan reads the covering index (retrieval 0005).

The index must change how the owner's vectors are read, never which memories
come back: the leg returns the 30 nearest of the owner's active memories
existing at ``as_of``, of the requested types, as a plain scan of the rows does.
"""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory
from memories.vectors import vector_text
from retrieval.legs import LegRequest, half_precision_error, nearest_active, vector_leg
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


def _fill_spread(owners, rows_each: int, seed: int = 7) -> None:
    """Rows whose vectors point every way (no two nearly alike), as real ones do."""
    rng = np.random.default_rng(seed)
    now = timezone.now()
    Memory.objects.bulk_create(
        Memory(
            owner=owner,
            type="semantic",
            content=f"row {i}",
            status="active",
            embedding=rng.standard_normal(settings.EMBEDDING_DIMENSIONS).tolist(),
            created_at=now - timedelta(days=int(rng.integers(60))),
        )
        for i in range(rows_each)
        for owner in owners
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")


def _heap_scores(request: LegRequest, embedding: list[float]) -> list[tuple[int, float]]:
    """The nearest memories and their similarities as the float32 vectors give them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, 1 - (embedding <=> %s::vector) AS similarity FROM memories_memory "
            "WHERE owner_id = %s AND status = 'active' AND created_at <= %s "
            "AND embedding IS NOT NULL ORDER BY embedding <=> %s::vector, id LIMIT %s",
            [vector_text(embedding), request.owner_id, request.as_of]
            + [vector_text(embedding), request.limit],
        )
        return cursor.fetchall()


def _scored(request: LegRequest) -> tuple[list[tuple[int, float]], list[str]]:
    with CaptureQueriesContext(connection) as queries, connection.cursor() as cursor:
        found = list(vector_leg(cursor, request))
    # The statements that compare vectors (the owner's share is read apart).
    return found, [query["sql"] for query in queries.captured_queries if "<=>" in query["sql"]]


def test_the_exact_scan_reads_only_the_covering_index_at_half_precision(alice, bob):
    # Enough of other owners' rows that reading the whole table costs more.
    _fill_spread([alice, bob, *(_owner(i) for i in range(9))], 400)
    embedding = np.random.default_rng(3).standard_normal(settings.EMBEDDING_DIMENSIONS).tolist()
    request = _request(alice, embedding)
    found, statements = _scored(request)
    # The shortlist answered, in one statement, with the float32 scan's ids and scores.
    assert len(statements) == 1
    assert found == _heap_scores(request, embedding)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, VERBOSE, COSTS OFF) " + statements[0])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    scan = plan.split("Index Only Scan using memory_active_embeddings", 1)[1]
    # The half-precision distance is computed by the index-only scan, once a
    # row; the float32 vectors are read for the shortlist's rows only.
    assert "Output: m_1.id, (m_1.embedding_half <=>" in scan
    assert "Heap Fetches: 0" in scan
    assert "rows=60.00 loops=1" in plan.split("CTE Scan on shortlist", 1)[1]
    assert "top-N heapsort" in plan  # the shortlist kept as it comes
    assert "memory_embedding_hnsw" not in plan


def test_the_covering_index_holds_each_vector_at_unit_length_and_half_precision(alice):
    memory = Memory.objects.create(
        owner=alice,
        type="semantic",
        content="Alice keeps bees on the roof. " * 12,
        status="active",
        embedding=vector((0, 3.0), (5, 1.0)),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedding_half = l2_normalize(embedding)::halfvec, "
            "vector_dims(embedding_half), pg_column_toast_chunk_id(embedding) "
            "FROM memories_memory WHERE id = %s",
            [memory.pk],
        )
        # The float32 vector stays in the row, where fusion reads it, though
        # the copy takes the row past the size at which PostgreSQL moves the
        # largest value out of line.
        assert cursor.fetchone() == (True, settings.EMBEDDING_DIMENSIONS, None)
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_active_embeddings'"
        )
        assert "INCLUDE (id, type, embedding_half)" in cursor.fetchone()[0]
    # Loaded rows leave it behind; the exact scan reads it from the index.
    assert "embedding_half" in Memory.objects.get(pk=memory.pk).get_deferred_fields()


def test_vectors_closer_than_half_precision_tells_apart_are_scanned_in_float32(alice):
    # 100 vectors that round to the same half-precision vector, each a little
    # further from the query than the one before; the farthest written first,
    # so that ties broken by id would shortlist the wrong 60.
    query = vector((0, 1.0))
    Memory.objects.bulk_create(
        Memory(
            owner=alice,
            type="semantic",
            content=f"row {i}",
            status="active",
            embedding=vector((0, 1.0), (1, 1.0 + i * 1e-6)),
        )
        for i in reversed(range(100))
    )
    request = _request(alice, query)
    found, statements = _scored(request)
    assert len(statements) == 2  # the shortlist, then the float32 scan
    assert found == _heap_scores(request, query)
    nearest = Memory.objects.filter(content="row 0").get().pk
    assert found[0][0] == nearest


def test_a_zero_query_vector_is_ordered_as_the_float32_scan_orders_it(alice, bob):
    _fill_spread([alice, bob], 100)
    query = [0.0] * settings.EMBEDDING_DIMENSIONS
    request = _request(alice, query)
    found, _ = _scored(request)
    assert [memory_id for memory_id, _ in found] == _heap_nearest(request, query)


def test_half_precision_moves_a_distance_by_no_more_than_its_bound():
    rng = np.random.default_rng(5)
    dimensions = settings.EMBEDDING_DIMENSIONS
    pairs = []
    for i in range(300):
        a = rng.standard_normal(dimensions) * rng.choice([1e-3, 1.0, 50.0])
        # Far apart, near each other, and nearly the same direction.
        b = a * rng.choice([-1.0, 1.0]) + rng.standard_normal(dimensions) * [3.0, 0.3, 1e-3][i % 3]
        pairs.append((vector_text(a), vector_text(b)))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(abs((l2_normalize(a::vector)::halfvec <=> l2_normalize(b::vector)::halfvec)"
            " - (a::vector <=> b::vector))) FROM unnest(%s::text[], %s::text[]) AS p(a, b)",
            [[a for a, _ in pairs], [b for _, b in pairs]],
        )
        largest = cursor.fetchone()[0]
    assert 0 < largest <= half_precision_error(dimensions)


def test_a_creates_nearest_candidates_are_what_the_rows_say(alice, bob):
    # memories.related gathers a new text's nearest memories through the same
    # index: ties in distance broken by id, as the float32 rows order them.
    _fill([alice, bob], 400)
    for direction in range(4):
        embedding = vector((direction, 1.0), (6, 0.5))
        request = _request(alice, embedding, as_of=timezone.now() + timedelta(days=1), limit=8)
        with connection.cursor() as cursor:
            found = nearest_active(cursor, alice.pk, embedding, 8)
        assert len(found) == 8
        assert found == _heap_nearest(request, embedding)
