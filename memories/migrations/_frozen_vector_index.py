"""What memories 0018, 0019 and 0020 run, frozen as they ran when written.

A migration must do tomorrow what it did the day it was written, whatever the
live code (``retrieval.index``, ``memories.models``) has become since; so these
functions take the connection they run on and write their SQL out, importing
nothing of the service. Never edit them: a later migration that needs the same
steps changed gets a frozen copy of its own. (The migration loader skips
modules whose names start with an underscore.)
"""

from __future__ import annotations

import os

MEMORY_TABLE = "memories_memory"
HNSW_INDEX = "memory_embedding_hnsw"
COVERING_INDEX = "memory_active_embeddings"

# maintenance_work_mem for a build: the whole graph in memory, within bounds;
# one parallel worker per core beyond the leader's, at most seven.
BUILD_BYTES_PER_ROW = 3 * 1024
BUILD_MEMORY_FLOOR_MB = 64
BUILD_MEMORY_CAP_MB = 4096
BUILD_MAX_WORKERS = 7


def column_dimensions(connection) -> int | None:
    """The dimension of ``memories_memory.embedding`` as the database has it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s AND NOT attisdropped",
            [MEMORY_TABLE, "embedding"],
        )
        row = cursor.fetchone()
    return row[0] if row and row[0] > 0 else None


def build_settings(rows: int) -> dict[str, str]:
    """Session settings for building an index over ``rows`` rows."""
    wanted_mb = BUILD_MEMORY_FLOOR_MB + rows * BUILD_BYTES_PER_ROW // (1024 * 1024)
    workers = max(0, min(BUILD_MAX_WORKERS, (os.cpu_count() or 1) - 1))
    return {
        "maintenance_work_mem": f"{min(BUILD_MEMORY_CAP_MB, wanted_mb)}MB",
        "max_parallel_maintenance_workers": str(workers),
    }


def rows_to_index(cursor) -> int:
    cursor.execute(
        f"SELECT count(*) FROM {MEMORY_TABLE} WHERE status = 'active' AND embedding IS NOT NULL"
    )
    return int(cursor.fetchone()[0])


def _set_session(cursor, values: dict[str, str]) -> dict[str, str]:
    previous = {}
    for name, value in values.items():
        cursor.execute("SELECT current_setting(%s), set_config(%s, %s, false)", [name, name, value])
        previous[name] = cursor.fetchone()[0]
    return previous


def vector_index_state(connection) -> str:
    """``live``, ``paused`` (missing) or ``invalid``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
            [HNSW_INDEX],
        )
        row = cursor.fetchone()
    if row is None:
        return "paused"
    return "live" if row[0] else "invalid"


def pause_vector_index(connection) -> bool:
    """Drop the HNSW graph; True if there was one to drop."""
    if vector_index_state(connection) == "paused":
        return False
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {HNSW_INDEX}")
    return True


def hnsw_create_sql(dimensions: int, ef_construction: int, *, concurrently: bool) -> str:
    """The graph over the active vectors at half precision, as Memory.Meta
    defined it then (m 16; ef_construction 128 for 0018, 96 from 0019)."""
    return (
        f'CREATE INDEX {"CONCURRENTLY " if concurrently else ""}"{HNSW_INDEX}" '
        f'ON "{MEMORY_TABLE}" USING hnsw ((("embedding")::halfvec({dimensions})) '
        f"halfvec_cosine_ops) WITH (m = 16, ef_construction = {ef_construction}) "
        "WHERE \"status\" = 'active'"
    )


def resume_vector_index(connection, *, ef_construction: int, default_dimensions: int) -> None:
    """Build the graph if it is missing or invalid: sized and parallel, for the
    dimension the column holds (``default_dimensions`` if it has none)."""
    state = vector_index_state(connection)
    if state == "live":
        return
    atomic = connection.in_atomic_block
    concurrently = "" if atomic else "CONCURRENTLY "
    dimensions = column_dimensions(connection) or default_dimensions
    with connection.cursor() as cursor:
        if atomic:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        if state == "invalid":
            cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {HNSW_INDEX}")
        previous = _set_session(cursor, build_settings(rows_to_index(cursor)))
        try:
            cursor.execute(hnsw_create_sql(dimensions, ef_construction, concurrently=not atomic))
        finally:
            _set_session(cursor, previous)


def add_half_precision_scan(connection, dimensions: int) -> None:
    """Add ``embedding_half`` (the vector at unit length and half precision,
    generated and stored) and build the exact scan's covering index over it;
    the float32 vector stays in the row (``STORAGE MAIN``)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {MEMORY_TABLE} ALTER COLUMN embedding SET STORAGE MAIN")
        cursor.execute(
            f'ALTER TABLE "{MEMORY_TABLE}" ADD COLUMN "embedding_half" halfvec({dimensions}) '
            f'GENERATED ALWAYS AS ((l2_normalize("embedding"))::halfvec({dimensions})) STORED'
        )
        cursor.execute(f"DROP INDEX IF EXISTS {COVERING_INDEX}")
        cursor.execute(
            f'CREATE INDEX "{COVERING_INDEX}" ON "{MEMORY_TABLE}" ("owner_id", "created_at") '
            'INCLUDE ("id", "type", "embedding_half") '
            'WHERE ("embedding" IS NOT NULL AND "status" = \'active\')'
        )


def drop_half_precision_scan(connection) -> None:
    """Drop ``embedding_half``, and the covering index with it."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {MEMORY_TABLE} DROP COLUMN IF EXISTS embedding_half")
