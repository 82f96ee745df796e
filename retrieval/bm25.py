"""BM25 over the owner's active memories, computed in PostgreSQL from their postings.

Terms are the query's English lexemes (the same ones the text leg uses);
a term's frequency in a memory is the number of positions the lexeme has in
its ``tsv``; a memory's length is the number of distinct lexemes in it
(``length(tsv)``: its words less the stop words and repeats — counting
positions instead would unnest every memory of the owner on every query, about
2.5 times the text leg's time at 10,000 memories, for memories that rarely
repeat a word); N, n and the average length count the owner's active memories
as of ``as_of``:

    idf(t)        = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))
    score(m)      = Σ_t idf(t) · f(t,m) · (k1 + 1) / (f(t,m) + k1 · (1 − b + b · |m| / avg|m|))
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime

from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval.constants import BM25_B, BM25_CORPUS_STATS_TTL_SECONDS, BM25_K1, BM25_TOP
from retrieval.lexemes import query_lexemes
from retrieval.models import OwnerCorpusChange, Posting

MEMORY_TABLE = Memory._meta.db_table
POSTING_TABLE = Posting._meta.db_table
CORPUS_TABLE = OwnerCorpusChange._meta.db_table

# The moment a memory counts from at as_of: its last confirmation, unless that
# happened after as_of (a replay must not see the future), else its creation.
# (retrieval.fusion.reference_time is the same rule in Python.)
REFERENCE_TIME_SQL = (
    "CASE WHEN m.last_confirmed_at <= %(as_of)s THEN m.last_confirmed_at ELSE m.created_at END"
)
# The same, from a posting (which copies both dates of its memory).
POSTING_REFERENCE_TIME_SQL = (
    "CASE WHEN t.last_confirmed_at <= %(as_of)s THEN t.last_confirmed_at ELSE t.created_at END"
)


# N and the average length of an owner's corpus as of a moment in the past
# (a replay), per (owner, as_of): reading them means reading every active
# memory of the owner (docs/benchmarks.md has the cost). A recall "now" reads
# the sums the triggers keep instead (OwnerCorpusChange), one index-only read.
_corpus_cache: dict[tuple[int, str], tuple[float, float, float]] = {}
_corpus_lock = threading.Lock()
_CORPUS_CACHE_MAX = 10_000


def _is_now(as_of: datetime) -> bool:
    return abs((timezone.now() - as_of).total_seconds()) < BM25_CORPUS_STATS_TTL_SECONDS


def corpus_statistics(cursor, owner_id: int, as_of: datetime) -> tuple[float, float]:
    """(N, average length) of the owner's active memories at ``as_of``.

    Now (within ``BM25_CORPUS_STATS_TTL_SECONDS``): from the owner's corpus sums,
    exact after every write. A moment in the past: counted from the memories
    created by then, and cached briefly per (owner, moment).
    """
    if _is_now(as_of):
        cursor.execute(
            f"SELECT coalesce(sum(documents), 0)::float8, coalesce(sum(total_length), 0)::float8 "
            f"FROM {CORPUS_TABLE} WHERE owner_id = %s",
            [owner_id],
        )
        documents, total_length = cursor.fetchone()
        if documents <= 0:
            return 0.0, 0.0
        return documents, total_length / documents
    ttl = BM25_CORPUS_STATS_TTL
    key = (owner_id, as_of.isoformat())
    if ttl > 0:
        with _corpus_lock:
            cached = _corpus_cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < ttl:
            return cached[1], cached[2]
    cursor.execute(
        f"""
        SELECT count(*)::float8, coalesce(avg(length(m.tsv)), 0)::float8
        FROM {MEMORY_TABLE} m
        WHERE m.owner_id = %s AND m.status = 'active' AND m.created_at <= %s
        """,
        [owner_id, as_of],
    )
    documents, average_length = cursor.fetchone()
    # An empty corpus is not kept: the owner's first memories must count at once.
    if ttl > 0 and documents > 0:
        with _corpus_lock:
            if len(_corpus_cache) >= _CORPUS_CACHE_MAX:
                _corpus_cache.clear()
            _corpus_cache[key] = (time.monotonic(), documents, average_length)
    return documents, average_length


def compact_corpus_sums() -> None:
    """Fold each owner's corpus changes into one row (the daily job does this)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT timothy_compact_owner_corpus()")


# Seconds a replay's corpus statistics are reused (0: never). A module variable
# so the test suite can turn the cache off and check BM25 against exact statistics.
BM25_CORPUS_STATS_TTL = BM25_CORPUS_STATS_TTL_SECONDS


# Below this many matching postings the query is ranked in one statement;
# above it, exact top-k pruning (below) spares aggregating most of them. A
# module variable so the test suite can force the pruned path on small data.
PRUNE_MIN_POSTINGS = 2000
# Bounds are compared with this much slack for floating-point rounding.
BOUND_SLACK = 1e-9


def bm25_scores(
    cursor,
    owner_id: int,
    query: str,
    as_of: datetime,
    *,
    types: tuple[str, ...] | None = None,
    top: int = BM25_TOP,
    b: float = BM25_B,
) -> list[tuple[int, float]]:
    """The ``top`` best (memory id, BM25 score) pairs, best first.

    Equal scores go most recently confirmed first: with nothing else to tell
    them apart, the newer memory is the better guess.

    Exact top-k pruning (MaxScore): a lexeme's contribution to any memory is
    at most its IDF times the term-frequency part at its highest frequency and
    shortest memory, both read with its document count. Memories that hold
    none of the rarest lexemes can score at most the sum of the other
    lexemes' bounds; once the ``top``-th best score among the memories that do
    hold one (each scored over every lexeme) is above that sum, no other
    memory can enter the answer, and the frequent lexemes' postings are read
    only for those candidates. Otherwise one more lexeme joins the rare ones,
    up to half the matching postings; past that, every match is ranked at
    once. The answer is the same, score for score, as ranking every match.
    """
    lexemes = query_lexemes(cursor, query)
    if not lexemes:
        return []
    documents, average_length = corpus_statistics(cursor, owner_id, as_of)
    params = {
        "documents": documents,
        "average_length": average_length,
        "owner_id": owner_id,
        "as_of": as_of,
        "lexemes": lexemes,
        "k1": BM25_K1,
        "b": b,
        "top": top,
        "types": list(types or ()),
    }
    if len(lexemes) > 1:
        pruned = _pruned_scores(cursor, params)
        if pruned is not None:
            return pruned
    # N and n count every active memory; only the answer is filtered by type.
    type_filter = "WHERE p.type = ANY(%(types)s)" if types else ""
    # The owner's postings of the query's lexemes (retrieval.models.Posting): an
    # index-only scan, where reading the matching memories themselves cost about
    # one 8 KB page each (docs/benchmarks.md).
    cursor.execute(
        f"""
        WITH corpus AS (
            SELECT %(documents)s::float8 AS documents,
                   greatest(%(average_length)s::float8, 1) AS average_length
        ),
        postings AS MATERIALIZED (
            SELECT t.memory_id AS id, t.type, t.length, t.term AS lexeme, t.frequency,
                   {POSTING_REFERENCE_TIME_SQL} AS reference_time
            FROM {POSTING_TABLE} t
            WHERE t.owner_id = %(owner_id)s AND t.kind = '{Posting.Kind.LEXEME}'
              AND t.term = ANY(%(lexemes)s::text[]) AND t.created_at <= %(as_of)s
        ),
        containing AS (SELECT lexeme, count(*)::float8 AS documents FROM postings GROUP BY lexeme)
        SELECT p.id, sum({SCORE_SQL}) AS score
        FROM postings p
        JOIN containing n USING (lexeme)
        CROSS JOIN corpus c
        {type_filter}
        GROUP BY p.id
        ORDER BY score DESC, max(p.reference_time) DESC, p.id DESC
        LIMIT %(top)s
        """,
        params,
    )
    return [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]


# One posting's share of its memory's score; the same expression on both paths,
# so that both add the same numbers in the same order.
SCORE_SQL = """
            ln(1 + (c.documents - n.documents + 0.5) / (n.documents + 0.5))
            * p.frequency * (%(k1)s + 1)
            / (p.frequency + %(k1)s * (1 - %(b)s + %(b)s * p.length / c.average_length))
"""


def _pruned_scores(cursor, params: dict) -> list[tuple[int, float]] | None:
    """The answer by MaxScore pruning, or None when it would not save anything."""
    cursor.execute(
        f"""
        SELECT t.term, count(*)::float8, max(t.frequency), min(t.length)
        FROM {POSTING_TABLE} t
        WHERE t.owner_id = %(owner_id)s AND t.kind = '{Posting.Kind.LEXEME}'
          AND t.term = ANY(%(lexemes)s::text[]) AND t.created_at <= %(as_of)s
        GROUP BY t.term
        """,
        params,
    )
    found = cursor.fetchall()
    total = sum(count for _, count, _, _ in found)
    if len(found) < 2 or total < PRUNE_MIN_POSTINGS:
        return None
    documents = params["documents"]
    average_length = max(params["average_length"], 1.0)
    k1, b = params["k1"], params["b"]
    bounds = {}
    for term, count, frequency, length in found:
        idf = math.log(1 + (documents - count + 0.5) / (count + 0.5))
        tf = frequency * (k1 + 1) / (frequency + k1 * (1 - b + b * length / average_length))
        bounds[term] = max(0.0, idf * tf) * (1 + BOUND_SLACK)
    counts = {term: count for term, count, _, _ in found}
    # Rarest (highest bound) first: their memories are the likeliest winners.
    order = sorted(bounds, key=lambda term: (-bounds[term], counts[term], term))
    terms = [term for term, _, _, _ in found]
    scoring = dict(params, terms=terms, term_documents=[counts[term] for term in terms])
    type_filter = "AND t.type = ANY(%(types)s)" if params["types"] else ""
    for size in range(1, len(order)):
        essential = order[:size]
        rest_bound = sum(bounds[term] for term in order[size:])
        if sum(counts[term] for term in essential) * 2 > total:
            return None  # reading half the postings anyway: rank them all at once
        cursor.execute(
            f"""
            WITH corpus AS (
                SELECT %(documents)s::float8 AS documents,
                       greatest(%(average_length)s::float8, 1) AS average_length
            ),
            candidates AS MATERIALIZED (
                SELECT DISTINCT t.memory_id FROM {POSTING_TABLE} t
                WHERE t.owner_id = %(owner_id)s AND t.kind = '{Posting.Kind.LEXEME}'
                  AND t.term = ANY(%(essential)s::text[]) AND t.created_at <= %(as_of)s
                  {type_filter}
            ),
            postings AS MATERIALIZED (
                SELECT t.memory_id AS id, t.type, t.length, t.term AS lexeme, t.frequency,
                       {POSTING_REFERENCE_TIME_SQL} AS reference_time
                FROM {POSTING_TABLE} t
                WHERE t.owner_id = %(owner_id)s AND t.kind = '{Posting.Kind.LEXEME}'
                  AND t.term = ANY(%(lexemes)s::text[]) AND t.created_at <= %(as_of)s
                  AND t.memory_id IN (SELECT memory_id FROM candidates)
            ),
            containing AS (
                SELECT * FROM unnest(%(terms)s::text[], %(term_documents)s::float8[])
                    AS s(lexeme, documents)
            )
            SELECT p.id, sum({SCORE_SQL}) AS score
            FROM postings p
            JOIN containing n USING (lexeme)
            CROSS JOIN corpus c
            GROUP BY p.id
            ORDER BY score DESC, max(p.reference_time) DESC, p.id DESC
            LIMIT %(top)s
            """,
            dict(scoring, essential=essential),
        )
        ranked = [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]
        if len(ranked) == params["top"] and ranked[-1][1] > rest_bound:
            return ranked
    return None
