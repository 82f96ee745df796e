"""The three legs of the fusion pipeline and the runner that runs them at once.

A leg is a function ``(cursor, request) -> memory ids, best first`` over the
owner's active memories as they stood at ``request.as_of``. The runner looks
each one up in ``LEG_FUNCTIONS`` on every call (so a test can put a failing
function in its place), runs it in its own transaction with a statement
timeout, and turns whatever happened into a ``LegReport``.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeVar

import numpy as np
from django.db import DatabaseError, connection, transaction

from memories.models import EMBEDDING_HALF, Memory
from memories.vectors import graph_distance, vector_text
from retrieval import replay
from retrieval.bm25 import bm25_scores, corpus_statistics
from retrieval.constants import (
    BM25,
    ENTITY_MAX_CHARS,
    ENTITY_SUBSTRING,
    ENTITY_WORDS,
    EXACT_SCAN_SHORTLIST,
    HNSW_EF_SEARCH,
    HNSW_MAX_SCAN_TUPLES,
    HNSW_MIN_OWNER_SHARE,
    LEG_LIMIT,
    LEG_WORKERS,
    TEXT_BM25_B,
    TS_RANK,
    VECTOR_EXACT_SCAN_MAX_ROWS,
)
from retrieval.embeddings import MODEL_LOADING, model_loading
from retrieval.lexemes import clean_query, query_lexemes
from retrieval.models import OwnerEntity, Posting
from retrieval.posting_lists import PostingLists, first_in_order, read_postings
from retrieval.results import LegReport
from timothy.concurrency import (
    ThreadPool,
    gather,
    hnsw_search,
    local_settings,
    must_run_inline,
    set_for_session,
)

logger = logging.getLogger(__name__)

MEMORY_TABLE = Memory._meta.db_table
OWNER_ENTITY_TABLE = OwnerEntity._meta.db_table
T = TypeVar("T")
QUERY_CANCELED = "57014"
# How long past its own timeout the runner waits for a leg: the database cancels
# the statement at the timeout, this only covers getting the answer back.
WAIT_GRACE_SECONDS = 0.25


class LegSkipped(Exception):
    """The leg has nothing to search with (no embedding provider, no stored vectors)."""


class Ranked(list):
    """A leg's answer: (memory id, score) pairs, best first; the vector leg also
    hands back the query embedding it searched with."""

    def __init__(self, pairs=(), *, query_embedding: Sequence[float] | None = None) -> None:
        super().__init__(pairs)
        self.query_embedding = query_embedding


@dataclass(frozen=True)
class LegRequest:
    owner_id: int
    query: str
    as_of: datetime
    types: tuple[str, ...] | None = None
    limit: int = LEG_LIMIT
    query_embedding: tuple[float, ...] | None = None
    # Embeds the query when no embedding was given: an EmbeddingProvider.
    embedder: object | None = None
    timeout: float = 3.0
    # bm25 | ts_rank (the seed profile's text leg)
    text_ranker: str = BM25
    # words | substring (the seed profile's entity matching)
    entity_match: str = ENTITY_WORDS
    # Read the memory rows alive at as_of rather than today's postings
    # (retrieval/replay.py decides when a replay of the past needs it).
    replay: bool = False
    # The vector leg walks the shared graph only for an owner with more rows
    # than this (None: VECTOR_EXACT_SCAN_MAX_ROWS).
    exact_scan_max_rows: int | None = None


def _filters(request: LegRequest) -> tuple[str, dict]:
    """WHERE conditions every leg shares: owner, active (at as_of), type."""
    # status is a literal so the planner can use the indexes built on active rows.
    sql = "m.owner_id = %(owner_id)s AND m.status = 'active' AND m.created_at <= %(as_of)s"
    if request.replay:
        sql = replay.ALIVE_SQL
    params: dict = {"owner_id": request.owner_id, "as_of": request.as_of, "limit": request.limit}
    if request.types:
        params["types"] = list(request.types)
        sql += " AND m.type = ANY(%(types)s)"
    return sql, params


# --- text -----------------------------------------------------------------------


def text_leg(cursor, request: LegRequest) -> Ranked:
    """Memories sharing any English lexeme with the query, by BM25.

    BM25 rather than ``ts_rank``: its IDF makes a word found in half the
    owner's memories (their own name, say) count for little and a rare one for
    much; ``ts_rank`` weighs them alike (docs/evaluation.md has the figures).
    The seed profile ranks by ``ts_rank`` all the same.
    """
    if request.text_ranker == TS_RANK:
        return Ranked(ts_rank_scores(cursor, request))
    score = replay.bm25_scores if request.replay else bm25_scores
    return Ranked(
        score(
            cursor,
            request.owner_id,
            request.query,
            request.as_of,
            types=request.types,
            top=request.limit,
            b=TEXT_BM25_B,
        )
    )


def ts_rank_scores(cursor, request: LegRequest) -> list[tuple[int, float]]:
    """Seed 000's text leg: the OR of the query's lexemes, ranked by ``ts_rank``.

    It reads the memories' ``tsv`` (not the postings), as the seed did.
    """
    lexemes = query_lexemes(cursor, request.query)
    if not lexemes:
        return []
    where, params = _filters(request)
    params["lexemes"] = lexemes
    cursor.execute(
        f"""
        WITH q AS (
            SELECT to_tsquery('english', string_agg(quote_literal(lexeme), ' | ')) AS query
            FROM unnest(%(lexemes)s::text[]) AS lexeme
        )
        SELECT m.id, ts_rank(m.tsv, q.query) AS rank
        FROM {MEMORY_TABLE} m, q
        WHERE {where} AND m.tsv @@ q.query
        ORDER BY rank DESC, m.id DESC
        LIMIT %(limit)s
        """,
        params,
    )
    return [(memory_id, float(rank)) for memory_id, rank in cursor.fetchall()]


# --- entity ---------------------------------------------------------------------


def entity_candidates(query: str, max_chars: int = ENTITY_MAX_CHARS) -> set[str]:
    """Every stretch of the query that could be an entity named in it.

    A stretch starts where a word (or a non-word character) begins with no word
    character right before it, and ends with no word character right after it —
    the boundaries of ``(?<!\\w)name(?!\\w)`` — so "Ann" is found in "Ann's" but
    not in "annual". Whitespace runs count as one space, as in stored names.
    """
    text = " ".join(clean_query(query).split())
    length = len(text)
    is_word = [bool(_WORD_CHAR.match(char)) for char in text]
    ends = [
        end
        for end in range(1, length + 1)
        if text[end - 1] != " " and (end == length or not is_word[end])
    ]
    candidates: set[str] = set()
    end_index = 0
    for start in range(length):
        if text[start] == " " or (start > 0 and is_word[start - 1]):
            continue
        while end_index < len(ends) and ends[end_index] <= start:
            end_index += 1
        for end in ends[end_index:]:
            if end - start > max_chars:
                break
            candidates.add(text[start:end])
    return candidates


_WORD_CHAR = re.compile(r"\w")


def entity_leg(cursor, request: LegRequest) -> Ranked:
    """Memories naming an entity that the query names literally.

    Ranked by how many of the query's entities they name, then by how rare the
    rarest of those is among the owner's active memories, then by recency. The
    score is the sum over the names of ``ln(1 + N / memories naming it)``: a name
    in half the owner's memories (their own, a speaker's) says little, a rare
    one much — as IDF weighs words.

    A name is named by the query on word boundaries (``entity_candidates``),
    or under the seed profile anywhere in it (``ENTITY_SUBSTRING``).
    """
    if request.entity_match == ENTITY_SUBSTRING:
        return _substring_entity_leg(cursor, request)
    candidates = entity_candidates(request.query)
    if not candidates:
        return Ranked()
    if request.replay:
        keys = sorted({candidate.lower() for candidate in candidates})
        return _replayed_entity_scores(cursor, request, keys)
    # One index probe per stretch of the query in the owner's dictionary,
    # lower-cased by PostgreSQL's lower() like the stored keys.
    cursor.execute(
        f"""
        SELECT e.key, e.memories FROM {OWNER_ENTITY_TABLE} e
        WHERE e.owner_id = %s AND e.memories > 0
          AND e.key = ANY(ARRAY(SELECT DISTINCT lower(c) FROM unnest(%s::text[]) AS c))
        """,
        [request.owner_id, sorted(candidates)],
    )
    return _ranked_by_entities(cursor, request, dict(cursor.fetchall()))


def _replayed_entity_scores(cursor, request: LegRequest, keys: list[str]) -> Ranked:
    """The entity leg of a replay: the memories alive at ``as_of`` naming ``keys``."""
    return Ranked(
        replay.entity_scores(
            cursor,
            request.owner_id,
            keys,
            request.as_of,
            types=request.types,
            limit=request.limit,
        )
    )


def _substring_entity_leg(cursor, request: LegRequest) -> Ranked:
    """Seed 000's entity match: every name of the owner's that occurs anywhere
    in the query, ``position(lower(name) IN lower(query))``, whatever its length
    and wherever the word boundaries fall. It reads the owner's whole entity
    dictionary (or, in a replay, the entities of the memories alive then)."""
    query = clean_query(request.query)
    if not query:
        return Ranked()
    if request.replay:
        where, params = _filters(request)
        params["query"] = query
        cursor.execute(
            f"""
            SELECT DISTINCT lower(ref) FROM {MEMORY_TABLE} m CROSS JOIN LATERAL
                unnest(m.entity_refs) AS ref
            WHERE {where} AND ref <> '' AND position(lower(ref) IN lower(%(query)s)) > 0
            """,
            params,
        )
        keys = sorted(row[0] for row in cursor.fetchall())
        if not keys:
            return Ranked()
        return _replayed_entity_scores(cursor, request, keys)
    cursor.execute(
        f"""
        SELECT e.key, e.memories FROM {OWNER_ENTITY_TABLE} e
        WHERE e.owner_id = %s AND e.memories > 0 AND e.key <> ''
          AND position(e.key IN lower(%s)) > 0
        """,
        [request.owner_id, query],
    )
    return _ranked_by_entities(cursor, request, dict(cursor.fetchall()))


def _ranked_by_entities(cursor, request: LegRequest, named: dict[str, int]) -> Ranked:
    """The memories naming the ``named`` entities (key → memories naming it), ranked."""
    if not named:
        return Ranked()
    documents, _ = corpus_statistics(cursor, request.owner_id, request.as_of)
    # The owner's postings of the named entities (retrieval.models.Posting): an
    # index-only scan, where reading the memories themselves cost about one 8 KB
    # page per memory naming them (docs/benchmarks.md).
    postings = read_postings(
        cursor, request.owner_id, Posting.Kind.ENTITY, sorted(named), request.as_of, request.types
    )
    return Ranked(rank_entities(postings, named, documents, limit=request.limit))


def rank_entities(
    postings: PostingLists, named: dict[str, int], documents: float, *, limit: int
) -> list[tuple[int, float]]:
    """The entity leg's order over the postings of the named entities: most names
    first, then the rarest name (``named``: memories naming each), then recency;
    each scored Σ ln(1 + N / memories naming it)."""
    if not len(postings):
        return []
    naming = np.array([max(named[term], 1) for term in postings.terms], dtype=np.float64)
    per_posting = naming[postings.term_index]
    memory_ids, memory_of = postings.by_memory()
    names = np.bincount(memory_of, minlength=len(memory_ids))
    scores = np.bincount(
        memory_of, weights=np.log(1 + max(documents, 1.0) / per_posting), minlength=len(memory_ids)
    )
    rarest = np.full(len(memory_ids), np.inf)
    np.minimum.at(rarest, memory_of, per_posting)
    latest = np.full(len(memory_ids), np.iinfo(np.int64).min)
    np.maximum.at(latest, memory_of, postings.reference_time)
    best = first_in_order((-memory_ids, -latest, rarest, -names), limit)
    return [(int(memory_ids[i]), float(scores[i])) for i in best]


# --- vector ---------------------------------------------------------------------


def vector_leg(cursor, request: LegRequest) -> Ranked:
    """Nearest memories by cosine similarity to the query's embedding (the score)."""
    embedding = request.query_embedding
    if embedding is None:
        if request.embedder is None:
            raise LegSkipped("no embedding provider configured")
        if model_loading():
            # A fresh worker: answer with the other legs rather than wait (timothy/warmup.py).
            raise LegSkipped(MODEL_LOADING)
        embedding = request.embedder.embed([request.query], timeout=request.timeout)[0]
        if any(not math.isfinite(value) for value in embedding):
            raise ValueError("the embedding provider returned a non-finite vector")
    where, params = _filters(request)
    params["embedding"] = vector_text(embedding)
    # The HNSW graph is shared by every owner: a walk filtered to one owner
    # visits about (all rows / the owner's rows) tuples per row it keeps, each
    # a heap fetch. It pays only for an owner holding a good share of the
    # table; everyone else is scanned exactly, which costs their own rows.
    # The graph indexes today's active rows only: a replay scans exactly.
    if not request.replay and _owner_dominates(
        cursor, request.owner_id, request.exact_scan_max_rows
    ):
        nearest = _approximate_nearest(cursor, where, params, len(embedding))
        if len(nearest) >= request.limit:
            return Ranked(nearest, query_embedding=tuple(embedding))
    # A small owner, or the walk gave up before finding enough of this
    # owner's rows (few of them carry vectors, or they lie far away).
    if request.replay:
        # The rows alive then, read from the table, where the half-precision
        # copy is kept out of line: the float32 vectors beside them serve.
        nearest = _exact_nearest_float(cursor, where, params)
    else:
        nearest = _exact_nearest(cursor, where, params, len(embedding))
    if not nearest:
        raise LegSkipped("no embeddings stored")
    return Ranked(nearest, query_embedding=tuple(embedding))


def _owner_dominates(cursor, owner_id: int, exact_scan_max_rows: int | None = None) -> bool:
    """Whether the owner holds enough of the table for the shared graph to pay.

    Read from the planner's statistics (the owner's share among the most
    common owner ids, times the table's size) rather than by counting rows,
    which for a big owner costs as much as the search itself.
    """
    table_rows, share = _owner_share(cursor, owner_id)
    if share is None:
        return False
    if exact_scan_max_rows is None:
        exact_scan_max_rows = VECTOR_EXACT_SCAN_MAX_ROWS
    return share >= HNSW_MIN_OWNER_SHARE and share * table_rows > exact_scan_max_rows


# The planner's statistics move only when the table is analysed, and reading
# them through the pg_stats view costs ~0.8 ms, a tenth of the vector leg: a
# process reuses an owner's share this many seconds (a module variable so the
# test suite can read them afresh after its own ANALYZE).
OWNER_SHARE_TTL = 60.0
_owner_shares: dict[tuple[str, int], tuple[float, float, float | None]] = {}
_owner_shares_lock = threading.Lock()
_OWNER_SHARES_MAX = 100_000


def _owner_share(cursor, owner_id: int) -> tuple[float, float | None]:
    """(the table's rows, the owner's share of them or None when not among the
    most common owners), as the planner last counted them."""
    key = (cursor.db.settings_dict["NAME"], owner_id)
    if OWNER_SHARE_TTL > 0:
        with _owner_shares_lock:
            cached = _owner_shares.get(key)
        if cached is not None and time.monotonic() - cached[0] < OWNER_SHARE_TTL:
            return cached[1], cached[2]
    cursor.execute(
        """
        SELECT greatest(c.reltuples, 0), (
            SELECT s.most_common_freqs[
                array_position(s.most_common_vals::text::bigint[], %s::bigint)
            ]
            FROM pg_stats s
            WHERE s.schemaname = current_schema() AND s.tablename = %s
              AND s.attname = 'owner_id'
        )
        FROM pg_class c WHERE c.oid = %s::regclass
        """,
        [owner_id, MEMORY_TABLE, MEMORY_TABLE],
    )
    table_rows, share = cursor.fetchone()
    if OWNER_SHARE_TTL > 0:
        with _owner_shares_lock:
            if len(_owner_shares) >= _OWNER_SHARES_MAX:
                _owner_shares.clear()
            _owner_shares[key] = (time.monotonic(), table_rows, share)
    return table_rows, share


def half_precision_error(dimensions: int) -> float:
    """The most a cosine distance computed from the half-precision copies
    (``Memory.embedding_half``, and the query rounded alike) can differ from
    the one computed from the float32 vectors.

    Rounding to half precision moves each component by at most 2**-11 of
    itself, so a unit vector by at most 2**-11 of its length and, once scaled
    back to unit length, by 2 * 2**-11; a dot product of two unit vectors so
    moved changes by at most 4 * 2**-11. The two computations' float32 sums
    over ``dimensions`` terms (dot product and norms, each) add at most
    6 * dimensions * 2**-24 between them.
    """
    return 4 * 2.0**-11 + 6 * dimensions * 2.0**-24


def nearest_active(cursor, owner_id: int, embedding: Sequence[float], limit: int) -> list[int]:
    """The ids of the owner's ``limit`` active memories nearest ``embedding``,
    nearest first (equal distances by id), found as the vector leg finds them:
    for an owner who dominates the table, through the shared graph; else as a
    float32 scan of their rows orders them, read through the half-precision
    covering index (``_exact_nearest``). A create's related check gathers its
    candidates so (an exact scan of 100,000 vectors cost it ~290 ms of
    PostgreSQL's CPU a create)."""
    where = "m.owner_id = %(owner_id)s AND m.status = 'active'"
    params = {"owner_id": owner_id, "limit": limit, "embedding": vector_text(embedding)}
    if _owner_dominates(cursor, owner_id):
        nearest = _approximate_nearest(cursor, where, params, len(embedding))
        if len(nearest) >= limit:
            return [memory_id for memory_id, _ in nearest]
    return [memory_id for memory_id, _ in _exact_nearest(cursor, where, params, len(embedding))]


def _exact_nearest(cursor, where: str, params: dict, dimensions: int) -> list[tuple[int, float]]:
    """The ``limit`` nearest of the owner's vectors, exactly as a scan of the
    float32 vectors orders and scores them.

    The owner's vectors are compared at half precision first: the covering
    index memory_active_embeddings (memories 0020) holds each active one as
    ``embedding_half`` (unit length, 2 bytes a value), so an index-only scan
    reads the owner's entries, which lie together, at half the bytes the
    float32 copy took. The ``EXACT_SCAN_SHORTLIST`` nearest are kept as they
    come (a top-N sort, each distance computed once in a subquery the planner
    cannot flatten, nor order through the graph), then scored from their
    float32 vectors. Half precision moves a distance by at most
    ``half_precision_error``: when the shortlist's last half-precision
    distance lies further than that beyond the ``limit``-th exact one, no
    vector left out can be nearer, and the answer is the full scan's. When it
    does not (a cluster of vectors tighter than that, or many ties), the
    float32 vectors are scanned (tests/retrieval/test_exact_scan.py).
    """
    limit = params["limit"]
    shortlist = max(EXACT_SCAN_SHORTLIST, 2 * limit)
    cursor.execute(
        f"""
        WITH shortlist AS MATERIALIZED (
            SELECT id, distance
            FROM (
                SELECT m.id,
                       m.{EMBEDDING_HALF} <=> l2_normalize(%(embedding)s::vector)::halfvec
                           AS distance
                FROM {MEMORY_TABLE} m
                WHERE {where} AND m.embedding IS NOT NULL
                OFFSET 0
            ) owned
            ORDER BY distance, id
            LIMIT %(shortlist)s
        )
        SELECT s.id, s.distance, m.embedding <=> %(embedding)s::vector
        FROM shortlist s JOIN {MEMORY_TABLE} m ON m.id = s.id
        """,
        {**params, "shortlist": shortlist},
    )
    rows = cursor.fetchall()
    if any(math.isnan(half) or math.isnan(distance) for _, half, distance in rows):
        # A zero vector has no direction: the float32 scan orders it as it always did.
        return _exact_nearest_float(cursor, where, params)
    scored = sorted((distance, memory_id) for memory_id, _, distance in rows)
    if len(rows) == shortlist:
        farthest_half = max(half for _, half, _ in rows)
        if farthest_half <= scored[limit - 1][0] + half_precision_error(dimensions):
            return _exact_nearest_float(cursor, where, params)
    return [(memory_id, 1 - distance) for distance, memory_id in scored[:limit]]


def _exact_nearest_float(cursor, where: str, params: dict) -> list[tuple[int, float]]:
    # Every one of the owner's float32 vectors compared, read from the rows.
    cursor.execute(
        f"""
        SELECT id, 1 - distance
        FROM (
            SELECT m.id, m.embedding <=> %(embedding)s::vector AS distance
            FROM {MEMORY_TABLE} m
            WHERE {where} AND m.embedding IS NOT NULL
            OFFSET 0
        ) owned
        ORDER BY distance, id
        LIMIT %(limit)s
        """,
        params,
    )
    return [(memory_id, float(similarity)) for memory_id, similarity in cursor.fetchall()]


def _approximate_nearest(
    cursor, where: str, params: dict, dimensions: int
) -> list[tuple[int, float]]:
    # Keep walking the graph until LIMIT rows pass the owner/status filter. The
    # settings are local to a transaction: on a pool thread's connection, which
    # runs its legs in autocommit, one is opened for them (inside the caller's,
    # this joins it).
    with (
        transaction.atomic(savepoint=False),
        local_settings(cursor, hnsw_search(HNSW_EF_SEARCH, max_scan_tuples=HNSW_MAX_SCAN_TUPLES)),
    ):
        # The graph finds the candidates at half precision; they are scored and
        # ordered by their exact distance (relaxed_order may also return them
        # slightly out of order).
        cursor.execute(
            f"""
            WITH nearest AS MATERIALIZED (
                SELECT m.id, m.embedding <=> %(embedding)s::vector AS distance
                FROM {MEMORY_TABLE} m
                WHERE {where}
                ORDER BY {graph_distance("m.embedding", "%(embedding)s", dimensions)}
                LIMIT %(limit)s
            )
            SELECT id, 1 - distance FROM nearest ORDER BY distance, id
            """,
            params,
        )
        return [(memory_id, float(similarity)) for memory_id, similarity in cursor.fetchall()]


# Returns (id, score) pairs best first; plain ids are accepted too (scored by rank).
LegFunction = Callable[..., Sequence]

LEG_FUNCTIONS: dict[str, LegFunction] = {
    "vector": vector_leg,
    "text": text_leg,
    "entity": entity_leg,
}


# --- running --------------------------------------------------------------------


def run_step(
    name: str, step: Callable[[object], T], timeout: float, *, own_connection: bool = False
) -> tuple[LegReport, T | None]:
    """Run ``step(cursor)`` on this thread's connection, cancelled by the
    database after ``timeout`` seconds; report what happened.

    ``own_connection``: the connection belongs to a thread of the legs' pool,
    which runs nothing else, so the timeout is set on its session once
    (``set_for_session``) and the step runs in autocommit. Elsewhere (a
    request's connection, the caller's transaction) the step gets a
    (sub)transaction of its own and the timeout lasts as long as it.
    """
    started = time.perf_counter()
    report = LegReport(name=name, status="ok")
    result: T | None = None
    timeout_ms = str(max(1, int(timeout * 1000)))
    # Inside the caller's transaction the timeout must be put back afterwards;
    # on a thread's own connection the step's transaction ends with it.
    inline = must_run_inline()
    try:
        if own_connection and not inline:
            with connection.cursor() as cursor:
                set_for_session(cursor, "statement_timeout", timeout_ms)
                result = step(cursor)
        else:
            with (
                transaction.atomic(),
                connection.cursor() as cursor,
                local_settings(cursor, {"statement_timeout": timeout_ms}, restore=inline),
            ):
                result = step(cursor)
    except LegSkipped as skipped:
        report.status = "skipped"
        report.error = str(skipped)
    except DatabaseError as error:
        cause = getattr(error, "__cause__", None)
        if getattr(cause, "sqlstate", None) == QUERY_CANCELED:
            report.status = "timeout"
            report.error = f"cancelled after {timeout:g} s"
        else:
            report.status = "failed"
            report.error = _describe(error)
    except Exception as error:
        report.status = "failed"
        report.error = _describe(error)
    report.ms = (time.perf_counter() - started) * 1000
    if report.status in ("failed", "timeout"):
        logger.warning("recall step %s %s: %s", name, report.status, report.error)
    return report, result


def run_leg(name: str, request: LegRequest, own_connection: bool = False) -> LegReport:
    """Run one leg of ``LEG_FUNCTIONS`` on this thread's connection
    (``own_connection``: as ``run_step``)."""
    report, found = run_step(
        name,
        lambda cursor: LEG_FUNCTIONS[name](cursor, request),
        request.timeout,
        own_connection=own_connection,
    )
    if report.status == "ok":
        pairs = [
            item if isinstance(item, tuple) else (item, -float(rank))
            for rank, item in enumerate(list(found or [])[: request.limit], start=1)
        ]
        report.ranked_ids = [memory_id for memory_id, _ in pairs]
        report.scores = [float(score) for _, score in pairs]
        report.count = len(report.ranked_ids)
        report.query_embedding = getattr(found, "query_embedding", None)
    return report


def _describe(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}"[:300] if text else type(error).__name__


_pool = ThreadPool("recall-leg", LEG_WORKERS)


def run_legs(names: Sequence[str], request: LegRequest, *, deadline: float) -> dict[str, LegReport]:
    """Run the named legs at once and report on each; never raises for a leg.

    ``deadline`` is a ``time.monotonic()`` instant that bounds the whole wait.
    Inside an open transaction the legs run one after the other on the caller's
    connection instead, because other connections could not see its rows.
    """
    if must_run_inline():
        return _run_legs_inline(names, request, deadline)
    futures = {name: _pool.submit(run_leg, name, request, True) for name in names}
    wait_for = max(0.0, min(request.timeout + WAIT_GRACE_SECONDS, deadline - time.monotonic()))
    reports, late = gather(futures, wait_for)
    for name in late:
        reports[name] = LegReport(
            name=name, status="timeout", ms=wait_for * 1000, error="no answer in time"
        )
        logger.warning("recall leg %s timed out after %.2f s", name, wait_for)
    return {name: reports[name] for name in futures}


def _run_legs_inline(
    names: Sequence[str], request: LegRequest, deadline: float
) -> dict[str, LegReport]:
    reports: dict[str, LegReport] = {}
    for name in names:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            reports[name] = LegReport(name=name, status="timeout", error="no time left")
            continue
        bounded = replace(request, timeout=min(request.timeout, remaining))
        reports[name] = run_leg(name, bounded)
    return reports
