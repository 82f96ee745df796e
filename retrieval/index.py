"""The retrieval index's vector part, paused for bulk loads and built once afterwards.

Every row written while the HNSW graph is live costs a graph search of its
own: importing 100,000 memories with their vectors took 1,160 s that way,
against 21 s without vectors (docs/benchmarks.md). Building the graph once
over the finished table, in memory and with parallel workers, costs a
fraction of that. ``vector_index_paused()`` does that for a bulk load when the
load is a large enough share of what the index will hold.

While paused, nothing is wrong, only slower: the vector leg scans an owner's
vectors exactly through the covering index (which stays live), and the few
owners who are searched through the graph get the same exact answer by a
scan. Outside a transaction the index is dropped and built CONCURRENTLY, so
readers and writers carry on; inside one (tests, scratch databases) it is
dropped and built in that transaction. ``resume_vector_index()`` is safe to
call at any time: it builds whatever is missing or was left invalid by an
interrupted build.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection

from memories.models import EMBEDDING_HNSW_EF_CONSTRUCTION, EMBEDDING_HNSW_M, Memory

logger = logging.getLogger(__name__)

MEMORY_TABLE = Memory._meta.db_table
HNSW_INDEX = "memory_embedding_hnsw"
HNSW_DEFINITION = (
    f"ON {MEMORY_TABLE} USING hnsw (embedding vector_cosine_ops) "
    f"WITH (m = {EMBEDDING_HNSW_M}, ef_construction = {EMBEDDING_HNSW_EF_CONSTRUCTION}) "
    "WHERE status = 'active'"
)

# A bulk load pauses the graph when it brings at least this share of the
# vectors the index will hold, and at least this many: a live insert cost
# 7-12 ms a row at load 4, a build about 1.5 ms a row of the whole table.
PAUSE_MIN_SHARE = 0.2
PAUSE_MIN_ROWS = 2000
# maintenance_work_mem for a build: the whole graph in memory (a 384-d vector
# and its neighbour lists take about 2.2 KB), within these bounds. A graph that
# does not fit is built on disk, many times slower.
BUILD_BYTES_PER_ROW = 3 * 1024
BUILD_MEMORY_FLOOR_MB = 64
BUILD_MEMORY_CAP_MB = 4096
# Parallel workers of a build: one per core beyond the leader's.
BUILD_MAX_WORKERS = 7


def indexed_vectors() -> int:
    """Active rows with a vector, as the planner estimates them (no count)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%s)",
            [HNSW_INDEX],
        )
        row = cursor.fetchone()
        if row is None:
            cursor.execute(
                f"SELECT count(*) FROM {MEMORY_TABLE} "
                "WHERE status = 'active' AND embedding IS NOT NULL"
            )
            row = cursor.fetchone()
    return int(row[0])


def pause_pays(new_vectors: int, existing_vectors: int | None = None) -> bool:
    """Whether building the graph afterwards beats inserting ``new_vectors`` into it."""
    if new_vectors < PAUSE_MIN_ROWS:
        return False
    existing = indexed_vectors() if existing_vectors is None else existing_vectors
    return new_vectors >= PAUSE_MIN_SHARE * (existing + new_vectors)


def vector_index_state() -> str:
    """``live``, ``paused`` (missing) or ``invalid`` (an interrupted concurrent build)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
            [HNSW_INDEX],
        )
        row = cursor.fetchone()
    if row is None:
        return "paused"
    return "live" if row[0] else "invalid"


def pause_vector_index() -> bool:
    """Drop the HNSW index; True if there was one to drop."""
    if vector_index_state() == "paused":
        return False
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {HNSW_INDEX}")
    logger.info("Paused the vector index %s", HNSW_INDEX)
    return True


def resume_vector_index() -> float | None:
    """Build the HNSW index if it is missing or invalid; the seconds it took, or None."""
    state = vector_index_state()
    if state == "live":
        return None
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    started = time.perf_counter()
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            # DDL refuses to run while deferred foreign-key checks are pending.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        if state == "invalid":
            cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {HNSW_INDEX}")
        settings = build_settings(_rows_to_index(cursor))
        previous = _set_session(cursor, settings)
        try:
            cursor.execute(f"CREATE INDEX {concurrently}{HNSW_INDEX} {HNSW_DEFINITION}")
        finally:
            _set_session(cursor, previous)
    seconds = time.perf_counter() - started
    logger.info("Built the vector index %s in %.1f s", HNSW_INDEX, seconds)
    return seconds


@contextmanager
def vector_index_paused(
    new_vectors: int, *, report: Callable[[str], None] | None = None
) -> Iterator[dict]:
    """Pause the graph around a bulk load of ``new_vectors`` vectors if that pays.

    Yields a dict that gets ``paused`` (bool) and, after the block,
    ``index_seconds`` (the build, or None). The index is rebuilt even when the
    block fails, so a failed import leaves the service as it found it.
    """
    outcome: dict = {"paused": pause_pays(new_vectors), "index_seconds": None}
    if outcome["paused"]:
        if report:
            report(f"Pausing the vector index for {new_vectors:,} new vectors")
        pause_vector_index()
    try:
        yield outcome
    finally:
        if outcome["paused"]:
            if report:
                report("Building the vector index")
            outcome["index_seconds"] = resume_vector_index()


def build_settings(rows: int) -> dict[str, str]:
    """Session settings for building an index over ``rows`` rows."""
    wanted_mb = BUILD_MEMORY_FLOOR_MB + rows * BUILD_BYTES_PER_ROW // (1024 * 1024)
    workers = max(0, min(BUILD_MAX_WORKERS, (os.cpu_count() or 1) - 1))
    return {
        "maintenance_work_mem": f"{min(BUILD_MEMORY_CAP_MB, wanted_mb)}MB",
        "max_parallel_maintenance_workers": str(workers),
    }


def _rows_to_index(cursor) -> int:
    # Counted, not estimated: right after a bulk load the statistics still
    # describe the table before it, and too little memory means a build on disk.
    cursor.execute(
        f"SELECT count(*) FROM {MEMORY_TABLE} WHERE status = 'active' AND embedding IS NOT NULL"
    )
    return int(cursor.fetchone()[0])


def _set_session(cursor, values: dict[str, str]) -> dict[str, str]:
    """Set session parameters; return what they were."""
    previous = {}
    for name, value in values.items():
        cursor.execute("SELECT current_setting(%s), set_config(%s, %s, false)", [name, name, value])
        previous[name] = cursor.fetchone()[0]
    return previous
