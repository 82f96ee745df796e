"""The retrieval index: every database object recall reads besides the memories.

One module owns it. The parts (``PARTS`` below, and docs/retrieval.md's table of
what fires on a write to ``memories_memory``):

- three derived tables, kept by statement-level triggers on the memory table
  whatever writes: the postings (the text and entity legs' inverted index),
  the owner entity dictionary and the per-owner BM25 corpus sums;
- two indexes on the memory table: the HNSW graph (defined once, in
  ``Memory.Meta.indexes``) and the covering index of the vector leg's exact scan.

``INSTALLED_FUNCTIONS`` and ``trigger_create_sql()`` write out the functions and
triggers as the latest migration installs them (the migrations keep frozen
copies of their own). ``rebuild(owner=None)`` recounts the derived tables from
the memories, for one owner or all (``manage.py rebuild_retrieval_index``), and
builds the postings' key if it is missing. ``pause()`` and ``resume()`` bracket a bulk
load: the triggers off, the postings' key and the graph dropped, then
everything built once over the finished table. ``check()`` reports a part
that is missing, switched off or inconsistent with the memories on a sample
(a Django system check, and ``serve`` runs it at start-up).

The vector part is paused on its own for imports and re-embedding: every row
written while the HNSW graph is live costs a graph search of its
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
from dataclasses import dataclass

from django.conf import settings
from django.core import checks
from django.db import connection, transaction
from django.db.models.sql import Query

from memories.models import (
    EMBEDDING_HALF,
    EMBEDDING_HNSW_INDEX,
    Memory,
    embedding_graph_index,
    embedding_half_field,
    embedding_scan_index,
)
from retrieval.embeddings import EMBEDDING_COLUMN, column_dimensions
from retrieval.models import OwnerCorpusChange, OwnerEntity, Posting

logger = logging.getLogger(__name__)

MEMORY_TABLE = Memory._meta.db_table
# The graph is defined once (memories.models.embedding_graph_index, which
# Memory.Meta and so the migrations use); the SQL that drops and builds it here
# is made from that definition, for the column's dimension.
HNSW_INDEX = EMBEDDING_HNSW_INDEX
# The vector leg's exact scan reads an owner's vectors from it, at half
# precision (memories 0020; retrieval 0005 built it over the float32 vectors).
COVERING_INDEX = embedding_scan_index().name
# The postings' primary key, which the text and entity legs read by index-only
# scans (retrieval 0004). A bulk load drops it with the triggers: filling the
# table and then building the key once took 36 s at 1M memories (7.1M
# postings), against 56 s for the same rows written into the live key.
POSTING_TABLE = Posting._meta.db_table
POSTING_KEY = "retrieval_posting_pk"
POSTING_KEY_COLUMNS = "(owner_id, kind, term, memory_id)"
POSTING_KEY_INCLUDES = "(frequency, length, type, created_at, last_confirmed_at)"


@dataclass(frozen=True)
class Trigger:
    name: str
    function: str
    event: str  # "INSERT" or "UPDATE"
    maintains: str  # a key of DERIVED_TABLES


# The derived tables, by the names messages give them, and the functions
# that recount each from the memories (optionally one owner's rows: retrieval 0008).
DERIVED_TABLES = {
    "postings": Posting._meta.db_table,
    "entity dictionary": OwnerEntity._meta.db_table,
    "corpus sums": OwnerCorpusChange._meta.db_table,
}
REBUILD_FUNCTIONS = {
    "postings": "timothy_rebuild_postings",
    "entity dictionary": "timothy_rebuild_owner_entities",
    "corpus sums": "timothy_rebuild_owner_corpus",
}
# Statement-level AFTER triggers on the memory table, with transition tables
# (retrieval migrations 0003, 0004 and 0006).
TRIGGERS = (
    Trigger("memory_indexes_postings", "timothy_index_postings", "INSERT", "postings"),
    Trigger("memory_indexes_postings_on_update", "timothy_index_postings", "UPDATE", "postings"),
    Trigger(
        "memory_counts_owner_entities",
        "timothy_count_owner_entities",
        "INSERT",
        "entity dictionary",
    ),
    Trigger(
        "memory_counts_owner_entities_on_update",
        "timothy_count_owner_entities",
        "UPDATE",
        "entity dictionary",
    ),
    Trigger("memory_counts_owner_corpus", "timothy_count_owner_corpus", "INSERT", "corpus sums"),
    Trigger(
        "memory_counts_owner_corpus_on_update",
        "timothy_count_owner_corpus",
        "UPDATE",
        "corpus sums",
    ),
)
# The daily job folds each owner's corpus rows into one (retrieval.bm25).
COMPACT_FUNCTION = "timothy_compact_owner_corpus"
FUNCTIONS = tuple(
    dict.fromkeys(
        [trigger.function for trigger in TRIGGERS]
        + list(REBUILD_FUNCTIONS.values())
        + [COMPACT_FUNCTION]
    )
)


# --- the SQL installed ---------------------------------------------------------------
#
# The functions and triggers above as the database has them after the latest
# migration, in one place. The migrations that installed them (retrieval 0002-0008)
# keep their own frozen copies; a migration that changes one writes the new
# version here and a frozen copy of it into itself. ``check()`` compares each
# installed function's body with the one here (retrieval.W005).

# The postings of the rows called m (active ones only, as the callers choose):
# one per lexeme (kind 'l') and one per lower-cased entity name (kind 'e').
_POSTINGS_OF = """
    SELECT m.owner_id, 'l' AS kind, t.lexeme AS term, m.id AS memory_id,
           coalesce(array_length(t.positions, 1), 1) AS frequency, length(m.tsv) AS length,
           m.type, m.created_at, m.last_confirmed_at
    FROM {rows} AS m CROSS JOIN LATERAL unnest(m.tsv) AS t
    UNION ALL
    SELECT DISTINCT m.owner_id, 'e', lower(ref), m.id, 1, 0, m.type, m.created_at,
           m.last_confirmed_at
    FROM {rows} AS m CROSS JOIN LATERAL unnest(m.entity_refs) AS ref
    WHERE ref <> ''
"""
_POSTING_COLUMNS = (
    "owner_id, kind, term, memory_id, frequency, length, type, created_at, last_confirmed_at"
)
_POSTINGS_INDEXED = "id, owner_id, tsv, entity_refs, type, created_at, last_confirmed_at"
# The active versions an UPDATE removed (sign <) or brought (sign >). A row whose
# indexed columns are the same before and after (a last_retrieved_at stamp)
# cancels out. Grouped rather than joined on id: PL/pgSQL would keep a plan made
# for one row for the next statement's ten thousand.
_CHANGED = f"""
    (SELECT {_POSTINGS_INDEXED} FROM (
        SELECT {_POSTINGS_INDEXED}, -1 AS side FROM old_rows WHERE status = 'active'
        UNION ALL
        SELECT {_POSTINGS_INDEXED}, 1 FROM new_rows WHERE status = 'active'
    ) AS versions GROUP BY {_POSTINGS_INDEXED} HAVING sum(side) {{sign}} 0)
"""
_INSERT_POSTINGS_OF = f"INSERT INTO {POSTING_TABLE} ({_POSTING_COLUMNS}) {_POSTINGS_OF}"
_DELETE_LEAVING_POSTINGS = f"""
    DELETE FROM {POSTING_TABLE} AS p
    USING ({_POSTINGS_OF.format(rows=_CHANGED.format(sign="<"))}) AS leaving
    WHERE (p.owner_id, p.kind, p.term, p.memory_id)
          = (leaving.owner_id, leaving.kind, leaving.term, leaving.memory_id)
"""
_ENTITIES_OF = """
    INSERT INTO retrieval_ownerentity (owner_id, key, memories)
    SELECT owner_id, key, count(*)
    FROM (
        SELECT DISTINCT m.id, m.owner_id, lower(ref) AS key
        FROM {rows} AS m CROSS JOIN LATERAL unnest(m.entity_refs) AS ref
        WHERE ref <> ''
    ) AS named
    GROUP BY owner_id, key
"""
_CORPUS_OF = """
    INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
    SELECT owner_id, count(*), coalesce(sum(length(tsv)), 0)
    FROM {rows} AS m
    GROUP BY owner_id
"""
_ACTIVE = f"(SELECT * FROM {MEMORY_TABLE} WHERE status = 'active')"
_OWNERS_ACTIVE = f"(SELECT * FROM {MEMORY_TABLE} WHERE status = 'active' AND owner_id = for_owner)"


def _rebuild_body(table: str, rows_of: str) -> str:
    # Two branches rather than "for_owner IS NULL OR ...": the whole rebuild keeps
    # its plan, and one owner's is an index range, whatever plan PL/pgSQL caches.
    return f"""
BEGIN
    IF for_owner IS NULL THEN
        DELETE FROM {table};
        {rows_of.format(rows=_ACTIVE)};
    ELSE
        DELETE FROM {table} WHERE owner_id = for_owner;
        {rows_of.format(rows=_OWNERS_ACTIVE)};
    END IF;
END
"""


@dataclass(frozen=True)
class Function:
    signature: str  # name and arguments, as CREATE FUNCTION takes them
    returns: str
    language: str
    body: str  # what goes between the $$ quotes

    @property
    def name(self) -> str:
        return self.signature.split("(", 1)[0]

    def create_sql(self) -> str:
        return (
            f"CREATE OR REPLACE FUNCTION {self.signature} RETURNS {self.returns} "
            f"LANGUAGE {self.language} AS $${self.body}$$;"
        )


INSTALLED_FUNCTIONS = (
    # EXECUTE plans each statement for its own transition tables.
    Function(
        "timothy_index_postings()",
        "trigger",
        "plpgsql",
        f"""
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE $sql$
            {_INSERT_POSTINGS_OF.format(rows="(SELECT * FROM new_rows WHERE status = 'active')")}
        $sql$;
    ELSE
        EXECUTE $sql$ {_DELETE_LEAVING_POSTINGS} $sql$;
        EXECUTE $sql$ {_INSERT_POSTINGS_OF.format(rows=_CHANGED.format(sign=">"))} $sql$;
    END IF;
    RETURN NULL;
END
""",
    ),
    # Keys are lower(name), once per memory, empty names left out; a key no
    # active memory names any more keeps its row with a count of 0.
    Function(
        "timothy_count_owner_entities()",
        "trigger",
        "plpgsql",
        """
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- In (owner, key) order, so that concurrent writers lock the same rows in
        -- the same order.
        INSERT INTO retrieval_ownerentity AS e (owner_id, key, memories)
        SELECT owner_id, key, count(*)
        FROM (
            SELECT DISTINCT n.id, n.owner_id, lower(ref) AS key
            FROM new_rows AS n CROSS JOIN LATERAL unnest(n.entity_refs) AS ref
            WHERE n.status = 'active' AND ref <> ''
        ) AS named
        GROUP BY owner_id, key
        ORDER BY owner_id, key
        ON CONFLICT (owner_id, key) DO UPDATE SET memories = e.memories + excluded.memories;
    ELSE
        -- Only active versions count. A row whose owner and refs are the same
        -- before and after (an active row that only got a new last_retrieved_at,
        -- say) cancels out; what is left are the leaving (-1) and arriving (+1)
        -- versions of the rows that changed. Grouped rather than joined on id:
        -- PL/pgSQL keeps the plan made for the first statement's transition
        -- tables, and a nested loop planned for one row would go quadratic on the
        -- next statement that updates ten thousand.
        WITH changed AS (
            SELECT id, owner_id, entity_refs, sum(side) AS side
            FROM (
                SELECT id, owner_id, entity_refs, -1 AS side
                FROM old_rows WHERE status = 'active'
                UNION ALL
                SELECT id, owner_id, entity_refs, 1
                FROM new_rows WHERE status = 'active'
            ) AS versions
            GROUP BY id, owner_id, entity_refs
            HAVING sum(side) <> 0
        ), named AS (
            SELECT DISTINCT c.id, c.side, c.owner_id, lower(ref) AS key
            FROM changed AS c CROSS JOIN LATERAL unnest(c.entity_refs) AS ref
            WHERE ref <> ''
        ), net AS (
            SELECT owner_id, key, sum(side)::int AS change
            FROM named GROUP BY owner_id, key HAVING sum(side) <> 0
        )
        INSERT INTO retrieval_ownerentity AS e (owner_id, key, memories)
        SELECT owner_id, key, change FROM net
        -- Like 0002, a decrement only touches a key that is in the dictionary.
        WHERE change > 0 OR EXISTS (
            SELECT 1 FROM retrieval_ownerentity AS d
            WHERE d.owner_id = net.owner_id AND d.key = net.key
        )
        ORDER BY owner_id, key
        ON CONFLICT (owner_id, key) DO UPDATE SET memories = e.memories + excluded.memories;
    END IF;
    RETURN NULL;
END
""",
    ),
    # Appended, never updated: concurrent writers never wait on these rows.
    Function(
        "timothy_count_owner_corpus()",
        "trigger",
        "plpgsql",
        """
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
        SELECT owner_id, count(*), coalesce(sum(length(tsv)), 0)
        FROM new_rows WHERE status = 'active'
        GROUP BY owner_id;
    ELSE
        INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
        SELECT owner_id, sum(side), coalesce(sum(side * length(tsv)), 0)
        FROM (
            SELECT owner_id, tsv, -1 AS side FROM old_rows WHERE status = 'active'
            UNION ALL
            SELECT owner_id, tsv, 1 FROM new_rows WHERE status = 'active'
        ) AS versions
        GROUP BY owner_id
        HAVING sum(side) <> 0 OR sum(side * length(tsv)) <> 0;
    END IF;
    RETURN NULL;
END
""",
    ),
    # One row per owner. Only rows committed before it starts are folded.
    Function(
        "timothy_compact_owner_corpus()",
        "void",
        "sql",
        """
    WITH folded AS (
        DELETE FROM retrieval_ownercorpuschange
        RETURNING owner_id, documents, total_length
    )
    INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
    SELECT owner_id, sum(documents), sum(total_length)
    FROM folded
    GROUP BY owner_id
    HAVING sum(documents) <> 0 OR sum(total_length) <> 0;
""",
    ),
    Function(
        "timothy_rebuild_postings(for_owner bigint DEFAULT NULL)",
        "void",
        "plpgsql",
        _rebuild_body(POSTING_TABLE, _INSERT_POSTINGS_OF),
    ),
    Function(
        "timothy_rebuild_owner_entities(for_owner bigint DEFAULT NULL)",
        "void",
        "plpgsql",
        _rebuild_body("retrieval_ownerentity", _ENTITIES_OF),
    ),
    Function(
        "timothy_rebuild_owner_corpus(for_owner bigint DEFAULT NULL)",
        "void",
        "plpgsql",
        _rebuild_body("retrieval_ownercorpuschange", _CORPUS_OF),
    ),
)


def trigger_create_sql(trigger: Trigger) -> str:
    """``CREATE TRIGGER`` for one of ``TRIGGERS``: after each statement, with its
    transition tables (an UPDATE sees the rows before and after)."""
    tables = (
        "NEW TABLE AS new_rows"
        if trigger.event == "INSERT"
        else "OLD TABLE AS old_rows NEW TABLE AS new_rows"
    )
    return (
        f"CREATE TRIGGER {trigger.name} AFTER {trigger.event} ON {MEMORY_TABLE} "
        f"REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION {trigger.function}();"
    )


def normalized_sql(text: str) -> str:
    """SQL with every run of white space made one space: what check() compares."""
    return " ".join(text.split())


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
            cursor.execute(hnsw_create_sql(concurrently=not connection.in_atomic_block))
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


def hnsw_create_sql(*, concurrently: bool = False) -> str:
    """``CREATE INDEX`` for the graph as Memory.Meta (and so the migrations)
    define it, for the vectors the column holds now (a new model may have
    changed their dimension since)."""
    dimensions = column_dimensions() or settings.EMBEDDING_DIMENSIONS
    graph = embedding_graph_index(dimensions)
    return str(graph.create_sql(Memory, connection.schema_editor(), concurrently=concurrently))


def add_half_precision_scan(dimensions: int) -> None:
    """Add ``Memory.embedding_half`` for ``dimensions``-d vectors and build the
    exact scan's covering index over it (in place of any index of that name).

    PostgreSQL computes the column for every row as it adds it: the table is
    rewritten, and its indexes with it (pause the graph around a large one).
    The float32 vector is kept in the row (``STORAGE MAIN``): with the copy
    beside it a row passes the ~2 KB at which PostgreSQL moves its largest
    out-of-line-able value elsewhere (TOAST), and that would be the vector
    itself, which fusion and the shortlist's scoring read from the row.
    """
    embedding = Memory._meta.get_field("embedding").column
    field = embedding_half_field(dimensions)
    field.set_attributes_from_name(EMBEDDING_HALF)
    # What contribute_to_class would give it, without replacing Memory's own
    # field: the model, and the query its expression compiles against.
    field.model = Memory
    field._query = Query(model=Memory, alias_cols=False)
    with connection.schema_editor() as editor:
        editor.execute(f"ALTER TABLE {MEMORY_TABLE} ALTER COLUMN {embedding} SET STORAGE MAIN")
        editor.add_field(Memory, field)
        editor.execute(f"DROP INDEX IF EXISTS {COVERING_INDEX}")
        editor.add_index(Memory, embedding_scan_index())


def drop_half_precision_scan() -> None:
    """Drop ``Memory.embedding_half``, and the covering index with it (the
    column depends on ``embedding``, whose type cannot change while it exists)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {MEMORY_TABLE} DROP COLUMN IF EXISTS {EMBEDDING_HALF}")


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


# --- the derived tables -------------------------------------------------------------


def rebuild(
    owner: int | None = None, *, done: Callable[[str, float], None] | None = None
) -> dict[str, float]:
    """Recount the postings, the entity dictionary and the corpus sums from the memories.

    Only ``owner``'s rows (a user id) when given, every row otherwise. Writers
    to the memory table wait while it runs (a SHARE lock: what they write is
    counted once, by the rebuild or by the triggers after it); readers carry
    on. A missing postings' key (``pause()`` drops it) is built after the
    postings, once, as ``postings key``. ``done(part, seconds)`` is told as
    each part is finished. Returns the seconds each took.
    """
    seconds = {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {MEMORY_TABLE} IN SHARE MODE")
        for part, function in REBUILD_FUNCTIONS.items():
            started = time.perf_counter()
            if owner is None:
                cursor.execute(f"SELECT {function}()")
            else:
                cursor.execute(f"SELECT {function}(%s)", [owner])
            seconds[part] = time.perf_counter() - started
            if done:
                done(part, seconds[part])
        if not posting_key_exists():
            started = time.perf_counter()
            _build_posting_key(cursor)
            seconds["postings key"] = time.perf_counter() - started
            if done:
                done("postings key", seconds["postings key"])
    logger.info(
        "Rebuilt the retrieval index%s in %.1f s",
        "" if owner is None else f" of owner {owner}",
        sum(seconds.values()),
    )
    return seconds


def posting_key_exists() -> bool:
    """Whether the postings have their primary key (a bulk load drops it: ``pause()``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(%s) "
            "AND conname = %s AND contype = 'p')",
            [POSTING_TABLE, POSTING_KEY],
        )
        return cursor.fetchone()[0]


def _drop_posting_key(cursor) -> None:
    cursor.execute(f"ALTER TABLE {POSTING_TABLE} DROP CONSTRAINT IF EXISTS {POSTING_KEY}")


def _build_posting_key(cursor) -> None:
    """Build the postings' key over the table as it is (readers carry on while
    it is built; only writers wait), then make it the primary key."""
    # The sort holds every entry: about as much memory as the table's pages
    # (its statistics are stale right after a bulk load; the size is not).
    cursor.execute("SELECT pg_relation_size(%s) / (1024 * 1024)", [POSTING_TABLE])
    wanted_mb = BUILD_MEMORY_FLOOR_MB + int(cursor.fetchone()[0])
    memory = f"{min(BUILD_MEMORY_CAP_MB, wanted_mb)}MB"
    previous = _set_session(cursor, build_settings(0) | {"maintenance_work_mem": memory})
    try:
        cursor.execute(f"DROP INDEX IF EXISTS {POSTING_KEY}")
        cursor.execute(
            f"CREATE UNIQUE INDEX {POSTING_KEY} ON {POSTING_TABLE} {POSTING_KEY_COLUMNS} "
            f"INCLUDE {POSTING_KEY_INCLUDES}"
        )
        cursor.execute(
            f"ALTER TABLE {POSTING_TABLE} ADD CONSTRAINT {POSTING_KEY} "
            f"PRIMARY KEY USING INDEX {POSTING_KEY}"
        )
    finally:
        _set_session(cursor, previous)
    logger.info("Built the postings' key %s", POSTING_KEY)


def paused_triggers() -> list[str]:
    """The derived tables' triggers that are switched off (by ``pause()``), by name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) "
            "AND tgname = ANY(%s) AND tgenabled = 'D' ORDER BY tgname",
            [MEMORY_TABLE, [trigger.name for trigger in TRIGGERS]],
        )
        return [row[0] for row in cursor.fetchall()]


def pause(*, vectors: bool = True) -> None:
    """Switch the derived tables' triggers off, drop the postings' key (and the
    graph) for a bulk load.

    For every session, not only this one: until ``resume()``, recall does not
    see what anyone writes by its text or names, and the text and entity legs
    read the postings without their key (a scan of the table: slow, and on a
    large one past the legs' timeout). For scratch databases and maintenance
    windows; a load into a live service keeps the triggers (statement-level,
    they cost little per row) and pauses only the graph
    (``vector_index_paused()``).
    """
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            # ALTER TABLE refuses to run while deferred foreign-key checks are pending.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for trigger in TRIGGERS:
            cursor.execute(f"ALTER TABLE {MEMORY_TABLE} DISABLE TRIGGER {trigger.name}")
        _drop_posting_key(cursor)
    logger.info("Paused the retrieval index's triggers and the postings' key")
    if vectors:
        pause_vector_index()


def resume(*, done: Callable[[str, float], None] | None = None) -> dict[str, float]:
    """Switch paused triggers back on, recount what they missed, build the
    postings' key once over the recounted table, and build the graph.

    Safe at any time: with nothing paused it does nothing. Returns the seconds
    each part took (``vector index`` included when it was built).
    """
    seconds: dict[str, float] = {}
    if paused_triggers():
        with connection.cursor() as cursor:
            if connection.in_atomic_block:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for trigger in TRIGGERS:
                cursor.execute(f"ALTER TABLE {MEMORY_TABLE} ENABLE TRIGGER {trigger.name}")
        seconds.update(rebuild(done=done))
    built = resume_vector_index()
    if built is not None:
        seconds["vector index"] = built
        if done:
            done("vector index", built)
    return seconds


# --- check ---------------------------------------------------------------------------

# Memories whose postings, names and owners' sums check() compares with what
# the triggers would have written: the most recent ones, a few index probes each.
CHECK_SAMPLE = 20
REBUILD_HINT = "Run `python manage.py rebuild_retrieval_index`."
MIGRATE_HINT = "Run `python manage.py migrate`; if it is migrated, the part was dropped by hand."


def check(sample: int = CHECK_SAMPLE) -> list[checks.CheckMessage]:
    """Every part installed and switched on, and consistent with the memories on a sample.

    Errors: a part is missing or switched off (recall would silently miss
    memories). Warnings: the graph is paused or half built (slower, not
    wrong), or the sample disagrees with a derived table (rebuild it).
    """
    with connection.cursor() as cursor:
        problems = _missing_parts(cursor)
        if not problems:
            problems = _inconsistencies(cursor, sample)
    return problems


def _missing_parts(cursor) -> list[checks.CheckMessage]:
    problems: list[checks.CheckMessage] = []
    missing_tables = set()
    for part, table in DERIVED_TABLES.items():
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
        if not cursor.fetchone()[0]:
            missing_tables.add(table)
            problems.append(_error("E001", f"The {part} table {table} is missing.", MIGRATE_HINT))
    cursor.execute(
        "SELECT DISTINCT proname FROM pg_proc "
        "WHERE proname = ANY(%s) AND pg_function_is_visible(oid)",
        [list(FUNCTIONS)],
    )
    installed = {row[0] for row in cursor.fetchall()}
    for function in FUNCTIONS:
        if function not in installed:
            problems.append(
                _error(
                    "E002", f"The retrieval index function {function}() is missing.", MIGRATE_HINT
                )
            )
    problems.extend(_changed_functions(cursor))
    cursor.execute(
        "SELECT t.tgname, t.tgenabled, p.proname FROM pg_trigger t "
        "JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgrelid = to_regclass(%s)",
        [MEMORY_TABLE],
    )
    triggers = {name: (enabled, function) for name, enabled, function in cursor.fetchall()}
    for trigger in TRIGGERS:
        if trigger.name not in triggers:
            problems.append(
                _error(
                    "E003",
                    f"The trigger {trigger.name} on {MEMORY_TABLE} is missing: no "
                    f"{trigger.event} reaches the {trigger.maintains}.",
                    MIGRATE_HINT,
                )
            )
        elif triggers[trigger.name][0] == "D":
            problems.append(
                _error(
                    "E004",
                    f"The trigger {trigger.name} on {MEMORY_TABLE} is switched off (by a bulk "
                    f"load that paused the index and never resumed it?): no {trigger.event} "
                    f"reaches the {trigger.maintains}.",
                    REBUILD_HINT,
                )
            )
        elif triggers[trigger.name][1] != trigger.function:
            problems.append(
                _error(
                    "E005",
                    f"The trigger {trigger.name} calls {triggers[trigger.name][1]}(), "
                    f"not {trigger.function}().",
                    MIGRATE_HINT,
                )
            )
    if POSTING_TABLE not in missing_tables and not posting_key_exists():
        problems.append(
            _error(
                "E007",
                f"The postings' key {POSTING_KEY} is missing (dropped by a bulk load that "
                "paused the index and never resumed it?): the text and entity legs scan "
                "every posting.",
                REBUILD_HINT,
            )
        )
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [COVERING_INDEX])
    if not cursor.fetchone()[0]:
        problems.append(
            _error(
                "E006",
                f"The vector leg's covering index {COVERING_INDEX} is missing.",
                MIGRATE_HINT,
            )
        )
    state = vector_index_state()
    if state != "live":
        problems.append(
            checks.Warning(
                f"The vector index {HNSW_INDEX} is {state}: searches through the graph "
                "scan vectors instead (same results, slower).",
                hint=REBUILD_HINT,
                id="retrieval.W001",
            )
        )
    return problems


def _changed_functions(cursor) -> list[checks.CheckMessage]:
    """A warning for each installed function whose body is not the one
    ``INSTALLED_FUNCTIONS`` holds (white space aside)."""
    cursor.execute(
        "SELECT proname, prosrc FROM pg_proc "
        "WHERE proname = ANY(%s) AND pg_function_is_visible(oid)",
        [[function.name for function in INSTALLED_FUNCTIONS]],
    )
    bodies: dict[str, list[str]] = {}
    for name, source in cursor.fetchall():
        bodies.setdefault(name, []).append(normalized_sql(source))
    return [
        checks.Warning(
            f"The retrieval index function {function.name}() in the database is not the "
            "one this version defines (retrieval/index.py), so what it writes may differ.",
            hint=MIGRATE_HINT,
            id="retrieval.W005",
        )
        for function in INSTALLED_FUNCTIONS
        if function.name in bodies and normalized_sql(function.body) not in bodies[function.name]
    ]


def _inconsistencies(cursor, sample: int) -> list[checks.CheckMessage]:
    cursor.execute(SAMPLE_SQL, {"sample": sample})
    problems = []
    postings, dictionary, corpus = cursor.fetchone()
    if postings:
        problems.append(
            _inconsistent("postings", f"memories {', '.join(map(str, postings))}", "W002")
        )
    if dictionary:
        problems.append(_inconsistent("entity dictionary", ", ".join(dictionary), "W003"))
    if corpus:
        problems.append(
            _inconsistent("corpus sums", f"owners {', '.join(map(str, corpus))}", "W004")
        )
    return problems


def _error(code: str, message: str, hint: str) -> checks.Error:
    return checks.Error(message, hint=hint, id=f"retrieval.{code}")


def _inconsistent(part: str, which: str, code: str) -> checks.Warning:
    return checks.Warning(
        f"The retrieval index is out of step with the memories in its {part} ({which}): "
        "recall ranks from stale data.",
        hint=REBUILD_HINT,
        id=f"retrieval.{code}",
    )


# The most recent memories, whatever their status: an active one has exactly
# the postings the triggers write (each probed by its key), any other none;
# the dictionary counts each of their names as often as the postings hold it;
# their owners' corpus sums are their active memories and lexeme postings.
SAMPLE_SQL = f"""
WITH sample AS (
    SELECT id, owner_id, status, tsv, entity_refs, type, created_at, last_confirmed_at
    FROM {MEMORY_TABLE} ORDER BY id DESC LIMIT %(sample)s
), terms AS (
    SELECT s.*, 'l' AS kind, lexeme AS term
    FROM sample AS s CROSS JOIN LATERAL unnest(tsvector_to_array(s.tsv)) AS lexeme
    UNION
    SELECT s.*, 'e', lower(ref)
    FROM sample AS s CROSS JOIN LATERAL unnest(s.entity_refs) AS ref WHERE ref <> ''
), wrong_postings AS (
    SELECT t.id
    FROM terms AS t
    LEFT JOIN {DERIVED_TABLES["postings"]} AS p
        ON (p.owner_id, p.kind, p.term, p.memory_id) = (t.owner_id, t.kind, t.term, t.id)
       AND p.type = t.type AND p.created_at = t.created_at
       AND p.last_confirmed_at IS NOT DISTINCT FROM t.last_confirmed_at
    GROUP BY t.id, t.status
    HAVING count(p.memory_id) <> CASE WHEN t.status = 'active' THEN count(*) ELSE 0 END
), named AS (
    SELECT DISTINCT owner_id, term AS key FROM terms WHERE kind = 'e' AND status = 'active'
), wrong_names AS (
    SELECT n.owner_id, n.key
    FROM named AS n
    LEFT JOIN {DERIVED_TABLES["entity dictionary"]} AS d
        ON (d.owner_id, d.key) = (n.owner_id, n.key)
    WHERE coalesce(d.memories, 0) <> (
        SELECT count(*) FROM {DERIVED_TABLES["postings"]} AS p
        WHERE (p.owner_id, p.kind, p.term) = (n.owner_id, 'e', n.key)
    )
), wrong_sums AS (
    SELECT o.owner_id
    FROM (SELECT DISTINCT owner_id FROM sample) AS o
    WHERE (
        SELECT (coalesce(sum(c.documents), 0)::bigint, coalesce(sum(c.total_length), 0)::bigint)
        FROM {DERIVED_TABLES["corpus sums"]} AS c WHERE c.owner_id = o.owner_id
    ) <> (
        (SELECT count(*) FROM {MEMORY_TABLE} AS m
         WHERE m.owner_id = o.owner_id AND m.status = 'active'),
        (SELECT count(*) FROM {DERIVED_TABLES["postings"]} AS p
         WHERE p.owner_id = o.owner_id AND p.kind = 'l')
    )
)
SELECT
    ARRAY(SELECT id FROM wrong_postings ORDER BY id),
    ARRAY(SELECT owner_id || ':' || key FROM wrong_names ORDER BY 1),
    ARRAY(SELECT owner_id FROM wrong_sums ORDER BY 1)
"""


def resize_embedding_column(dimensions: int) -> None:
    """Make the column hold ``dimensions``-d vectors; every stored vector is dropped.

    Each statement is short; none waits on a model. The graph, the vectors'
    half-precision copy and its covering index are rebuilt empty (as
    Memory.Meta defines them) and fill as rows are re-embedded.
    """
    table, column = EMBEDDING_COLUMN
    with transaction.atomic(), connection.cursor() as cursor:
        # ALTER TABLE refuses to run while deferred foreign-key checks are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        pause_vector_index()
        drop_half_precision_scan()
        cursor.execute(
            f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(dimensions)}) USING NULL"
        )
        add_half_precision_scan(dimensions)
        resume_vector_index()
