"""BM25 over the owner's active memories, from their postings.

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

PostgreSQL reads the query's postings (``retrieval/posting_lists.py``); numpy
adds them up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval.constants import (
    BM25_B,
    BM25_CORPUS_STATS_TTL_SECONDS,
    BM25_DEFERRED_DATES_MIN_MEMORIES,
    BM25_K1,
    BM25_TOP,
)
from retrieval.lexemes import clean_query, query_lexemes
from retrieval.models import OwnerCorpusChange, Posting
from retrieval.posting_lists import (
    PostingLists,
    read_postings,
    rows_that_may_lead,
)

MEMORY_TABLE = Memory._meta.db_table
CORPUS_TABLE = OwnerCorpusChange._meta.db_table

# The moment a memory counts from at as_of: its last confirmation, unless that
# happened after as_of (a replay must not see the future), else its creation.
# (retrieval.fusion.reference_time is the same rule in Python, and
# posting_lists.POSTING_REFERENCE_TIME_SQL the same from a posting.)
REFERENCE_TIME_SQL = (
    "CASE WHEN m.last_confirmed_at <= %(as_of)s THEN m.last_confirmed_at ELSE m.created_at END"
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


def _lexemes_and_corpus_now(
    cursor, owner_id: int, query: str
) -> tuple[list[str], tuple[float, float]]:
    """``query_lexemes`` and ``corpus_statistics`` now, in one statement: the
    same expressions, one round trip fewer for every search's text leg."""
    cursor.execute(
        f"SELECT coalesce(tsvector_to_array(to_tsvector('english', %s)), '{{}}'), s.* "
        f"FROM (SELECT coalesce(sum(documents), 0)::float8, "
        f"coalesce(sum(total_length), 0)::float8 FROM {CORPUS_TABLE} WHERE owner_id = %s) s",
        [clean_query(query), owner_id],
    )
    lexemes, documents, total_length = cursor.fetchone()
    if documents <= 0:
        return list(lexemes), (0.0, 0.0)
    return list(lexemes), (documents, total_length / documents)


def compact_corpus_sums() -> None:
    """Fold each owner's corpus changes into one row (the daily job does this)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT timothy_compact_owner_corpus()")


# Owners of at least this many memories get their ties' dates read apart (a
# module variable so the test suite can send either way through the oracle).
BM25_DEFERRED_DATES = BM25_DEFERRED_DATES_MIN_MEMORIES

# Seconds a replay's corpus statistics are reused (0: never). A module variable
# so the test suite can turn the cache off and check BM25 against exact statistics.
BM25_CORPUS_STATS_TTL = BM25_CORPUS_STATS_TTL_SECONDS


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
    them apart, the newer memory is the better guess. N and n count every
    active memory; only the answer is filtered by ``types``.
    """
    if _is_now(as_of):
        lexemes, (documents, average_length) = _lexemes_and_corpus_now(cursor, owner_id, query)
        if not lexemes:
            return []
    else:
        lexemes = query_lexemes(cursor, query)
        if not lexemes:
            return []
        documents, average_length = corpus_statistics(cursor, owner_id, as_of)
    with_dates = documents < BM25_DEFERRED_DATES
    postings = read_postings(
        cursor, owner_id, Posting.Kind.LEXEME, lexemes, as_of, types, reference_times=with_dates
    )
    return rank_bm25(
        postings,
        documents,
        average_length,
        top=top,
        k1=BM25_K1,
        b=b,
        reference_times_of=lambda memory_ids: reference_times(cursor, owner_id, memory_ids, as_of),
    )


def reference_times(
    cursor, owner_id: int, memory_ids: Sequence[int], as_of: datetime
) -> dict[int, int]:
    """Each of the owner's ``memory_ids``' reference time at ``as_of``, in
    microseconds (as ``PostingLists.reference_time``: only their order counts).

    From the memory rows, one primary-key probe each: 0.6 ms for 36 memories
    where their postings, a probe per memory and lexeme, took 1.2 ms.
    """
    cursor.execute(
        f"""
        SELECT m.id, (extract(epoch FROM {REFERENCE_TIME_SQL}) * 1000000)::int8
        FROM {MEMORY_TABLE} m
        WHERE m.id = ANY(%(ids)s) AND m.owner_id = %(owner_id)s
        """,
        {"ids": [int(memory_id) for memory_id in memory_ids], "owner_id": owner_id, "as_of": as_of},
    )
    return dict(cursor.fetchall())


def rank_bm25(
    postings: PostingLists,
    documents: float,
    average_length: float,
    *,
    top: int,
    k1: float = BM25_K1,
    b: float = BM25_B,
    reference_times_of: Callable[[np.ndarray], dict[int, int]] | None = None,
) -> list[tuple[int, float]]:
    """BM25 of every memory the postings name; the ``top`` best, best first.

    Postings read without their reference times need ``reference_times_of``
    (memory ids → their reference times) to order equal scores.
    """
    if not len(postings):
        return []
    containing = postings.documents
    idf = np.log(1 + (documents - containing + 0.5) / (containing + 0.5))
    frequency = postings.frequency
    shares = (
        idf[postings.term_index]
        * frequency
        * (k1 + 1)
        / (frequency + k1 * (1 - b + b * postings.length / max(average_length, 1.0)))
    )
    memory_ids, memory_of = postings.by_memory()
    # Each memory's shares are added in the order of its terms, whatever the
    # memory: two memories with the same terms, frequencies and length score
    # exactly alike (and are then told apart by recency).
    scores = np.bincount(memory_of, weights=shares, minlength=len(memory_ids))
    rows = rows_that_may_lead(-scores, top)
    if postings.reference_time is not None:
        latest = np.full(len(memory_ids), _NEVER)
        np.maximum.at(latest, memory_of, postings.reference_time)
        latest = latest[rows]
    else:
        latest = _tie_breakers(memory_ids[rows], scores[rows], reference_times_of)
    best = rows[np.lexsort((-memory_ids[rows], -latest, -scores[rows]))[:top]]
    return [(int(memory_ids[i]), float(scores[i])) for i in best]


# Older than any reference time (and still negatable in int64).
_NEVER = np.iinfo(np.int64).min + 1


def _tie_breakers(
    memory_ids: np.ndarray,
    scores: np.ndarray,
    reference_times_of: Callable[[np.ndarray], dict[int, int]] | None,
) -> np.ndarray:
    """The reference times that order equal scores, read only for the memories
    whose score another one shares (any value does for the rest)."""
    latest = np.zeros(len(memory_ids), dtype=np.int64)
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    tied = counts[inverse] > 1
    if tied.any():
        if reference_times_of is None:
            raise ValueError("equal scores to order, and no reference times to order them by")
        found = reference_times_of(memory_ids[tied])
        latest[tied] = [found.get(int(memory_id), _NEVER) for memory_id in memory_ids[tied]]
    return latest
