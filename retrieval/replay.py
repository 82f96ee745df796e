"""Replays of the past: retrieval ``as_of`` a moment sees the store as it stood then.

Each version counts during its own lifetime as an active memory
(``Memory.active_since`` .. ``active_until``): a memory edited since is seen
in the version that was active then, a proposal confirmed later is not seen
yet, one archived since is still there.

The postings the legs read hold today's active memories only. A replay uses
them whenever they tell the truth about the moment — no version of the owner's
began or ended its life after it that was alive then, or is active today but
was not yet confirmed then (evaluations replay imported conversations this
way, on the fast path). Otherwise the legs read the memory rows, with the same
rankings (tests/retrieval/test_replay.py compares them).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval.bm25 import REFERENCE_TIME_SQL
from retrieval.constants import BM25_K1, REPLAY_AFTER_SECONDS
from retrieval.lexemes import query_lexemes

MEMORY_TABLE = Memory._meta.db_table

# The rows alive at %(as_of)s, of %(owner_id)s.
# (A redacted version said nothing, then or now.)
ALIVE_SQL = (
    "m.owner_id = %(owner_id)s AND m.active_since <= %(as_of)s"
    " AND (m.active_until IS NULL OR m.active_until > %(as_of)s) AND m.status <> 'redacted'"
)


def is_past(as_of: datetime) -> bool:
    """Whether ``as_of`` asks about the past rather than now."""
    return as_of < timezone.now() - timedelta(seconds=REPLAY_AFTER_SECONDS)


def needs_replay(owner_id: int, as_of: datetime) -> bool:
    """Whether the store as of ``as_of`` differs from today's active memories
    written by then (so the legs must read the memory rows)."""
    if not is_past(as_of):
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT EXISTS (
                SELECT 1 FROM {MEMORY_TABLE} m
                WHERE m.owner_id = %(owner_id)s AND (
                    (m.active_until > %(as_of)s AND m.active_since <= %(as_of)s)
                    OR (m.status = 'active' AND m.created_at <= %(as_of)s
                        AND m.active_since > %(as_of)s)
                )
            )
            """,
            {"owner_id": owner_id, "as_of": as_of},
        )
        return cursor.fetchone()[0]


def corpus_statistics(cursor, owner_id: int, as_of: datetime) -> tuple[float, float]:
    """(N, average length) of the memories alive at ``as_of``."""
    cursor.execute(
        f"""
        SELECT count(*)::float8, coalesce(avg(length(m.tsv)), 0)::float8
        FROM {MEMORY_TABLE} m WHERE {ALIVE_SQL}
        """,
        {"owner_id": owner_id, "as_of": as_of},
    )
    return cursor.fetchone()


def bm25_scores(
    cursor,
    owner_id: int,
    query: str,
    as_of: datetime,
    *,
    types: tuple[str, ...] | None,
    top: int,
    b: float,
) -> list[tuple[int, float]]:
    """``retrieval.bm25.bm25_scores`` over the memory rows alive at ``as_of``."""
    lexemes = query_lexemes(cursor, query)
    if not lexemes:
        return []
    documents, average_length = corpus_statistics(cursor, owner_id, as_of)
    type_filter = "WHERE p.type = ANY(%(types)s)" if types else ""
    cursor.execute(
        f"""
        WITH corpus AS (
            SELECT %(documents)s::float8 AS documents,
                   greatest(%(average_length)s::float8, 1) AS average_length
        ),
        matched AS MATERIALIZED (
            SELECT m.id, m.type, m.tsv, {REFERENCE_TIME_SQL} AS reference_time
            FROM {MEMORY_TABLE} m
            WHERE {ALIVE_SQL} AND tsvector_to_array(m.tsv) && %(lexemes)s::text[]
        ),
        postings AS (
            SELECT o.id, o.type, o.reference_time, length(o.tsv) AS length, t.lexeme,
                   coalesce(array_length(t.positions, 1), 1) AS frequency
            FROM matched o CROSS JOIN LATERAL unnest(o.tsv) AS t
            WHERE t.lexeme = ANY(%(lexemes)s::text[])
        ),
        containing AS (SELECT lexeme, count(*)::float8 AS documents FROM postings GROUP BY lexeme)
        SELECT p.id, sum(
            ln(1 + (c.documents - n.documents + 0.5) / (n.documents + 0.5))
            * p.frequency * (%(k1)s + 1)
            / (p.frequency + %(k1)s * (1 - %(b)s + %(b)s * p.length / c.average_length))
        ) AS score
        FROM postings p JOIN containing n USING (lexeme) CROSS JOIN corpus c
        {type_filter}
        GROUP BY p.id
        ORDER BY score DESC, max(p.reference_time) DESC, p.id DESC
        LIMIT %(top)s
        """,
        {
            "documents": documents,
            "average_length": average_length,
            "owner_id": owner_id,
            "as_of": as_of,
            "lexemes": lexemes,
            "k1": BM25_K1,
            "b": b,
            "top": top,
            "types": list(types or ()),
        },
    )
    return [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]


def entity_scores(
    cursor,
    owner_id: int,
    keys: list[str],
    as_of: datetime,
    *,
    types: tuple[str, ...] | None,
    limit: int,
) -> list[tuple[int, float]]:
    """The entity leg's ranking over the memory rows alive at ``as_of``: by how
    many of the query's names a memory names, then how rare the rarest is among
    the memories alive then, then recency."""
    type_filter = "WHERE a.type = ANY(%(types)s)" if types else ""
    cursor.execute(
        f"""
        WITH alive AS MATERIALIZED (
            SELECT DISTINCT m.id, m.type, {REFERENCE_TIME_SQL} AS reference_time, lower(ref) AS key
            FROM {MEMORY_TABLE} m CROSS JOIN LATERAL unnest(m.entity_refs) AS ref
            WHERE {ALIVE_SQL} AND lower(ref) = ANY(%(keys)s::text[])
        ),
        rarity AS (SELECT key, count(*) AS memories FROM alive GROUP BY key)
        SELECT a.id, count(*) FROM alive a JOIN rarity r USING (key)
        {type_filter}
        GROUP BY a.id
        ORDER BY count(*) DESC, min(r.memories) ASC, max(a.reference_time) DESC, a.id DESC
        LIMIT %(limit)s
        """,
        {
            "owner_id": owner_id,
            "as_of": as_of,
            "keys": keys,
            "types": list(types or ()),
            "limit": limit,
        },
    )
    return [(memory_id, float(named)) for memory_id, named in cursor.fetchall()]
