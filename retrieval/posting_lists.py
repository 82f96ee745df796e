"""An owner's postings of a few terms, read in one statement as numpy arrays.

The text and entity legs rank memories by what their postings say (BM25's
frequencies and lengths; how many named entities, how rare). Aggregating
tens of thousands of postings per memory in SQL cost 2–5 µs a posting; here
PostgreSQL only reads them (an index-only scan of ``retrieval_posting``) and
sends each term's columns as one binary array, and numpy does the
arithmetic (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import psycopg

from retrieval.models import Posting

POSTING_TABLE = Posting._meta.db_table

# The moment a memory counts from at as_of, from a posting (which copies both
# dates of its memory): its last confirmation, unless that happened after
# as_of (a replay must not see the future), else its creation.
# (retrieval.fusion.reference_time is the same rule in Python.)
POSTING_REFERENCE_TIME_SQL = (
    "CASE WHEN t.last_confirmed_at <= %(as_of)s THEN t.last_confirmed_at ELSE t.created_at END"
)

# array_send's layout: number of dimensions, a has-nulls flag and the element
# type (int4 each), then per dimension its size and lower bound (int4 each),
# then each element as an int4 length followed by its big-endian value.
_ARRAY_HEADER_BYTES = 12
_DIMENSION_BYTES = 8
_INT8_ELEMENT = np.dtype([("length", ">i4"), ("value", ">i8")])


@dataclass(frozen=True)
class PostingLists:
    """Postings of the terms found, one entry per posting, grouped by term.

    ``documents[i]`` is how many of the owner's memories alive at ``as_of``
    hold ``terms[i]`` (every type); the per-posting arrays hold only the
    postings of the types asked for. ``reference_time`` is in microseconds
    (any epoch: it only orders), or None when it was not asked for
    (``retrieval.bm25`` reads it for the few memories that need it).
    """

    terms: list[str]
    documents: np.ndarray
    term_index: np.ndarray
    memory_ids: np.ndarray
    frequency: np.ndarray
    length: np.ndarray
    reference_time: np.ndarray | None

    def __len__(self) -> int:
        return len(self.memory_ids)

    def by_memory(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct memory ids, sorted; for each posting the index of its memory)."""
        return np.unique(self.memory_ids, return_inverse=True)


def read_postings(
    cursor,
    owner_id: int,
    kind: str,
    terms: Sequence[str],
    as_of: datetime,
    types: Sequence[str] | None = None,
    *,
    reference_times: bool = True,
) -> PostingLists:
    """The owner's postings of ``kind`` for ``terms``, of memories written by ``as_of``.

    ``cursor`` is the Django cursor whose transaction (and statement timeout)
    the read joins. ``reference_times=False`` leaves out each posting's
    reference time, which only breaks ties: on the slowest questions its array
    was a fifth of the read.
    """
    params = {
        "owner_id": owner_id,
        "kind": kind,
        "terms": list(terms),
        "as_of": as_of,
        "types": list(types or ()),
    }
    # Frequency and length travel as one number (each array costs PostgreSQL
    # about 0.1 µs a posting to build): frequency × 2³² + length.
    columns = ("t.memory_id", "(t.frequency::int8 << 32) | t.length")
    if reference_times:
        columns += (POSTING_REFERENCE_TIME_SQL,)
    if types:
        # The counts cover every type; the postings only the types asked for.
        arrays = ", ".join(
            f"array_send(coalesce(array_agg({column}) FILTER (WHERE t.type = ANY(%(types)s)),"
            " '{}'))"
            for column in columns
        )
    else:
        arrays = ", ".join(f"array_send(array_agg({column}))" for column in columns)
    # Binary results, so that each array arrives as the bytes numpy reads; on
    # the same connection as the cursor, inside its transaction.
    raw = cursor.cursor.connection
    with cursor.db.wrap_database_errors, psycopg.Cursor(raw) as binary:
        binary.execute(
            f"""
            SELECT t.term, count(*), {arrays}
            FROM {POSTING_TABLE} t
            WHERE t.owner_id = %(owner_id)s AND t.kind = %(kind)s
              AND t.term = ANY(%(terms)s::text[]) AND t.created_at <= %(as_of)s
            GROUP BY t.term
            ORDER BY t.term
            """,
            params,
            binary=True,
        )
        rows = binary.fetchall()
    parts: list[list[np.ndarray]] = [[], [], [], []]
    for index, (_, _, ids, frequency_and_length, *reference_time) in enumerate(rows):
        memory_ids = _array(ids)
        parts[0].append(np.full(len(memory_ids), index, dtype=np.int64))
        parts[1].append(memory_ids)
        parts[2].append(_array(frequency_and_length))
        if reference_times:
            parts[3].append(_array(reference_time[0]))
    term_index, memory_ids, frequency_and_length, reference_time = (
        np.concatenate(part) if part else np.empty(0, dtype=np.int64) for part in parts
    )
    return PostingLists(
        terms=[row[0] for row in rows],
        documents=np.array([row[1] for row in rows], dtype=np.float64),
        term_index=term_index,
        memory_ids=memory_ids,
        frequency=(frequency_and_length >> 32).astype(np.float64),
        length=(frequency_and_length & 0xFFFFFFFF).astype(np.float64),
        reference_time=reference_time if reference_times else None,
    )


def first_in_order(keys: Sequence[np.ndarray], top: int) -> np.ndarray:
    """``np.lexsort(keys)[:top]`` (the last key sorts first), sorting only the rows
    that can be among the first ``top``: those whose last key is within its ``top``
    smallest values, ties included. A question whose words are in every other
    memory names tens of thousands of them, and sorting them all by three keys
    cost 9 ms of the text leg's tail (docs/benchmarks.md).
    """
    rows = rows_that_may_lead(keys[-1], top)
    # lexsort is stable and ``rows`` ascend, so ties keep the order a sort of
    # every row would give them.
    return rows[np.lexsort([key[rows] for key in keys])[:top]]


def rows_that_may_lead(primary: np.ndarray, top: int) -> np.ndarray:
    """The rows (ascending) whose ``primary`` is among its ``top`` smallest
    values, ties included: whatever the other keys, the first ``top`` rows of
    a sort are among them."""
    if top <= 0:
        return np.empty(0, dtype=np.intp)
    if len(primary) <= top:
        return np.arange(len(primary))
    bound = np.partition(primary, top - 1)[top - 1]
    return np.flatnonzero(primary <= bound)


def _array(data: bytes | None) -> np.ndarray:
    """A one-dimensional array of 8-byte integers without NULLs, from array_send's bytes."""
    if data is None or int.from_bytes(data[0:4], "big") == 0:  # no postings of these types
        return np.empty(0, dtype=np.int64)
    size = int.from_bytes(data[_ARRAY_HEADER_BYTES : _ARRAY_HEADER_BYTES + 4], "big")
    offset = _ARRAY_HEADER_BYTES + _DIMENSION_BYTES
    return np.frombuffer(data, dtype=_INT8_ELEMENT, offset=offset, count=size)["value"].astype(
        np.int64
    )
