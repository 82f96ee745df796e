"""Loading fusion's candidates: their rows and their vectors, in one binary statement.

A leg's answer is only a list of ids; fusion needs each candidate's row (its
type and dates score it, its text is packed) and, for the semantic gate and
the current-state check, its stored vector. Through the ORM that was two
statements, each row's columns printed as text and parsed back, and a model
instance built by the queryset machinery: about 10 ms of a recall over ~75
candidates at 100k memories (docs/benchmarks.md). Here one statement in
PostgreSQL's binary form brings both, and the instances are built straight
from the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np
import psycopg
from django.db import DEFAULT_DB_ALIAS, connections

from memories.models import EMBEDDING_HALF, Memory, loaded_row
from retrieval.constants import SUCCESSORS_EACH
from retrieval.models import RetrievalStamp
from retrieval.replay import ALIVE_SQL

MEMORY_TABLE = Memory._meta.db_table
STAMP_TABLE = RetrievalStamp._meta.db_table
# Every column a candidate carries: all but the vector (read apart, as bytes)
# and its half-precision copy, the text-search vector and the metadata (nothing
# after the legs reads them; like any deferred field, they are loaded if
# something does).
DEFERRED = ("embedding", EMBEDDING_HALF, "tsv", "metadata")
_FIELDS = [field for field in Memory._meta.concrete_fields if field.attname not in DEFERRED]
_ATTNAMES = [field.attname for field in _FIELDS]
# jsonb as text: the field's own converter reads it, as the ORM's would.
_SELECT = ", ".join(
    f"m.{field.column}::text" if field.get_internal_type() == "JSONField" else f"m.{field.column}"
    for field in _FIELDS
)
_DATETIMES = [
    index for index, field in enumerate(_FIELDS) if field.get_internal_type() == "DateTimeField"
]
# The stamp, which says whether recall must stamp the memory again: one probe
# of its key a row (a join let the planner scan every stamp).
_STAMP = f"(SELECT s.last_retrieved_at FROM {STAMP_TABLE} s WHERE s.memory_id = m.id)"
# Today's active memories written by as_of (a replay of the past: ALIVE_SQL).
_ACTIVE_SQL = "m.owner_id = %(owner_id)s AND m.status = 'active' AND m.created_at <= %(as_of)s"

# vector_send's layout: two 16-bit header fields (dimensions, unused), then
# each value a big-endian float4.
_SEND_HEADER_BYTES = 4
_SEND_VALUE = np.dtype(">f4")


def load_candidates(
    owner_id: int,
    ids: Iterable[int],
    as_of: datetime,
    *,
    replaying: bool = False,
    vectors: bool = True,
) -> tuple[dict[int, Memory], dict[int, np.ndarray]]:
    """The owner's memories among ``ids`` that a recall at ``as_of`` may return,
    by id, and (``vectors``) their stored vectors as float64 arrays, exactly the
    float32 values stored (a memory without one is left out)."""
    ids = list(ids)
    if not ids:
        return {}, {}
    vector_column = ", vector_send(m.embedding)" if vectors else ""
    sql = (
        f"SELECT {_SELECT}, {_STAMP}{vector_column} FROM {MEMORY_TABLE} m "
        f"WHERE {ALIVE_SQL if replaying else _ACTIVE_SQL} AND m.id = ANY(%(ids)s)"
    )
    rows = _fetch(sql, {"owner_id": owner_id, "as_of": as_of, "ids": ids})
    memories: dict[int, Memory] = {}
    found: dict[int, np.ndarray] = {}
    for memory, vector in _built(rows, vectors=vectors):
        memories[memory.pk] = memory
        if vector is not None:
            found[memory.pk] = vector
    return memories, found


def load_successors(
    owner_id: int,
    olders: Sequence[Memory],
    as_of: datetime,
    *,
    replaying: bool = False,
) -> tuple[dict[int, list[Memory]], dict[int, np.ndarray]]:
    """For each of ``olders``, the memories a recall at ``as_of`` may return
    that were written after it about the same subject and aspect, newest first
    (at most SUCCESSORS_EACH of each), keyed by the older memory's id; and
    every one's stored vector (one without a vector is left out: nothing could
    say it restates the older one)."""
    olders = [memory for memory in olders if memory.about_subject and memory.about_aspect]
    if not olders:
        return {}, {}
    # The lateral subquery is named m, as the candidates' own statement names
    # its table, so that _SELECT reads the same columns from it.
    sql = (
        f"SELECT o.older_id, {_SELECT}, {_STAMP}, vector_send(m.embedding) "
        "FROM unnest(%(older_ids)s::bigint[], %(subjects)s::text[], %(aspects)s::text[], "
        "%(since)s::timestamptz[]) AS o(older_id, subject, aspect, since) "
        f"CROSS JOIN LATERAL (SELECT m.* FROM {MEMORY_TABLE} m "
        f"WHERE {ALIVE_SQL if replaying else _ACTIVE_SQL} AND m.embedding IS NOT NULL "
        "AND m.about_subject = o.subject AND m.about_aspect = o.aspect "
        "AND m.created_at > o.since AND m.id <> o.older_id "
        "ORDER BY m.created_at DESC LIMIT %(each)s) m"
    )
    rows = _fetch(
        sql,
        {
            "owner_id": owner_id,
            "as_of": as_of,
            "older_ids": [memory.pk for memory in olders],
            "subjects": [memory.about_subject for memory in olders],
            "aspects": [memory.about_aspect for memory in olders],
            "since": [memory.created_at for memory in olders],
            "each": SUCCESSORS_EACH,
        },
    )
    successors: dict[int, list[Memory]] = {}
    found: dict[int, np.ndarray] = {}
    for (older_id, *_), (memory, vector) in zip(
        rows, _built([row[1:] for row in rows], vectors=True), strict=True
    ):
        successors.setdefault(older_id, []).append(memory)
        found[memory.pk] = vector
    return successors, found


def _fetch(sql: str, params: dict) -> list[tuple]:
    database = connections[DEFAULT_DB_ALIAS]
    database.ensure_connection()
    with database.wrap_database_errors, psycopg.Cursor(database.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def _built(rows: list[tuple], *, vectors: bool) -> list[tuple[Memory, np.ndarray | None]]:
    """Each row (``_FIELDS``, the stamp, then maybe the vector sent) as a
    Memory with its stamp attached, and its vector as float64 (or None)."""
    database = connections[DEFAULT_DB_ALIAS]
    converters = [
        (index, field.get_db_converters(database))
        for index, field in enumerate(_FIELDS)
        if field.get_db_converters(database)
    ]
    zone = database.timezone
    built: list[tuple[Memory, np.ndarray | None]] = []
    for row in rows:
        values = list(row[: len(_FIELDS)])
        for index, functions in converters:
            for convert in functions:
                values[index] = convert(values[index], None, database)
        # In the zone the ORM's timestamps carry.
        for index in _DATETIMES:
            if values[index] is not None:
                values[index] = values[index].astimezone(zone)
        memory = _instance(values, database.alias)
        stamped = row[len(_FIELDS)]
        RetrievalStamp.attach(memory, None if stamped is None else stamped.astimezone(zone))
        vector = None
        if vectors and row[-1] is not None:
            vector = np.frombuffer(row[-1], dtype=_SEND_VALUE, offset=_SEND_HEADER_BYTES).astype(
                np.float64
            )
        built.append((memory, vector))
    return built


def _instance(values: list, alias: str) -> Memory:
    """A Memory as loaded from the database with ``_FIELDS``' values, the
    ``DEFERRED`` fields read on first use (as after ``defer()``)."""
    return loaded_row(Memory, dict(zip(_ATTNAMES, values, strict=True)), alias)
