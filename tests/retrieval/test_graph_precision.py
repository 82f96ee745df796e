"""The HNSW graph holds vectors at half precision; what a search reports is exact.

The graph (memories.models.embedding_graph_index) only picks candidates. The
vector leg's walk and consolidation's probes order by the graph's expression,
so the planner walks it, and report each distance from the stored float32
vectors, so a score never carries the graph's rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.consolidation import near_duplicate_pairs
from memories.vectors import graph_distance, vector_text
from retrieval import legs
from retrieval.embeddings import column_dimensions
from retrieval.index import resize_embedding_column
from retrieval.legs import vector_leg
from tests.base import make_memory
from tests.retrieval.test_legs import request_for

pytestmark = pytest.mark.django_db


def unit_vectors(count: int, dimensions: int, seed: int = 5) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dimensions))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# Steered off every other plan, the planner walks the graph if, and only if, the
# ORDER BY reads as the index's expression (a few rows cost less to sort).
STEERED = ("enable_seqscan", "enable_bitmapscan", "enable_sort")


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        for name in STEERED:
            cursor.execute(f"SET {name} = off")
        try:
            cursor.execute(f"EXPLAIN {sql}")
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            for name in STEERED:
                cursor.execute(f"RESET {name}")


def through_the_graph(monkeypatch) -> None:
    """Make the vector leg walk the graph however few the owner's memories.

    Not through ANALYZE and the owner's share: the planner's statistics it
    writes outlive the test's transaction, and other tests read them.
    """
    monkeypatch.setattr(legs, "_owner_dominates", lambda *args, **kwargs: True)


def test_the_walk_reports_the_exact_scans_answer(alice, monkeypatch):
    vectors = unit_vectors(41, settings.EMBEDDING_DIMENSIONS)
    for index, values in enumerate(vectors[1:]):
        make_memory(alice, f"Memory {index}", embedding=values.tolist())
    query = tuple(vectors[0].tolist())
    request = request_for(alice, query_embedding=query, limit=30)
    with connection.cursor() as cursor:
        exact = list(vector_leg(cursor, request))

    through_the_graph(monkeypatch)
    with CaptureQueriesContext(connection) as queries, connection.cursor() as cursor:
        walked = list(vector_leg(cursor, request))
    [search] = [query["sql"] for query in queries if "halfvec" in query["sql"]]
    assert "memory_embedding_hnsw" in plan_of(search)

    # Forty memories: the walk finds every one, so it must give the exact
    # scan's thirty, in its order, with its scores to the last bit.
    assert walked == exact
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 - ((%s)::halfvec <=> (%s)::halfvec)",
            [vector_text(vectors[1]), vector_text(vectors[0])],
        )
        half_precision = cursor.fetchone()[0]
        cursor.execute(
            "SELECT 1 - ((%s)::vector <=> (%s)::vector)",
            [vector_text(vectors[1]), vector_text(vectors[0])],
        )
        full_precision = cursor.fetchone()[0]
    # The two precisions differ, so equal scores above are the float32 ones.
    assert half_precision != full_precision


def test_the_graph_and_its_searches_follow_a_new_dimension(alice, settings):
    settings.EMBEDDING_DIMENSIONS = 8
    resize_embedding_column(8)
    assert column_dimensions() == 8
    base, twin, other = unit_vectors(3, 8, seed=11)
    near = base + 0.01 * twin
    near /= np.linalg.norm(near)
    first = make_memory(alice, "Alice likes tea.", embedding=base.tolist())
    second = make_memory(alice, "Alice enjoys tea.", embedding=near.tolist())
    make_memory(alice, "Alice climbs.", embedding=other.tolist())

    sql = (
        "SELECT id FROM memories_memory WHERE status = 'active' "
        f"ORDER BY {graph_distance('embedding', repr(vector_text(base)), 8)} LIMIT 2"
    )
    assert "memory_embedding_hnsw" in plan_of(sql)
    assert sorted(near_duplicate_pairs(alice.pk)) == [
        (first.pk, second.pk),
        (second.pk, first.pk),
    ]
