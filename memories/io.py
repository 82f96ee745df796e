"""Moving an owner's memories in and out as JSON Lines.

One JSON object per line. Export writes every memory of an owner, with its
database id as ``id`` and its successor's id as ``superseded_by``; import reads
those ids as labels local to the file, so exporting and importing into another
owner rebuilds the same memories and the same chains.

Import checks every line on its own and keeps the good ones: a bad line is
reported with its number and the reason. The good lines go in with COPY in
one transaction, heads first, then the rows they supersede level by level (the
database insists that a superseded row already has its successor), each with an
``imported`` event.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from tqdm import tqdm

from memories.about import (
    SET_BY_IMPORT,
    About,
    KnownSubjects,
    about_fields,
    checked_about,
    derive_about,
    owner_names_of,
)
from memories.memory_json import EXPORT_FIELDS, memory_to_dict
from memories.models import (
    MAX_REASON_CHARS,
    REDACTED_CONTENT,
    BlankContent,
    InvalidMemory,
    Memory,
    MemoryEvent,
    TooLong,
    check_content,
    check_entities,
    fit_entities,
    known_subjects_of,
)
from memories.vectors import vector_text
from retrieval.entities import EntityFinder, owner_entity_keys
from retrieval.index import vector_index_paused
from retrieval.models import RetrievalStamp

# Rows per progress step on import, and per fetch on export.
BATCH_SIZE = 2000
# Files at least this large get a progress bar on stderr.
PROGRESS_MIN_BYTES = 256 * 1024

# An import reads what an export writes.
FIELDS = frozenset(EXPORT_FIELDS)
DATE_FIELDS = ("created_at", "last_confirmed_at", "last_retrieved_at")
TYPES = tuple(Memory.Type.values)
STATUSES = tuple(Memory.Status.values)
SOURCES = tuple(Memory.Source.values)
DEFAULT_STATUS = Memory.Status.ACTIVE
# Statuses of a row that may point to a successor.
CHAINED_STATUSES = (Memory.Status.SUPERSEDED, Memory.Status.REDACTED)
DEFAULT_SOURCE = Memory.Source.IMPORT
DEFAULT_CONFIDENCE = Memory._meta.get_field("confidence").default
MAX_SESSION_ID = Memory._meta.get_field("session_id").max_length
FLOAT32_MAX = 3.4028234663852886e38
# Line breaks to str.splitlines() and editors that JSON leaves raw inside strings
# (it escapes only control characters below U+0020); escaped on export so that
# one memory is one line for every reader.
# JSON numbers; bool is an int to Python but not a number here.
NUMBER_TYPES = frozenset({int, float})
LINE_BREAKS_ESCAPED = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class BadLine(Exception):
    """A line that cannot be imported; the message is the reason."""


@dataclass
class LineError:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class ParsedLine:
    line: int
    key: int | str | None
    successor_key: int | str | None
    fields: dict[str, Any]
    error: str = ""
    # Distance to the head of its chain (0: not superseded); None until resolved.
    depth: int | None = None

    @property
    def status(self) -> str:
        return self.fields["status"]


@dataclass
class ImportResult:
    imported: int = 0
    errors: list[LineError] = field(default_factory=list)
    # Seconds writing the rows, and building the vector index afterwards (None:
    # the load was small enough to go through the live index).
    write_seconds: float = 0.0
    index_seconds: float | None = None

    @property
    def failed(self) -> int:
        return len(self.errors)


# --- reading one line ------------------------------------------------------------


def _refuse_constant(name: str) -> float:
    raise BadLine(f"{name} is not a number JSON allows")


def _column(text: str, position: int) -> int:
    """The column (from 1) of ``position`` in a line. JSON reads past the line's
    own ending as whitespace, and the decoder's column would then count from
    after it: a line cut short would fail "at column 1"."""
    return min(position, len(text.rstrip("\r\n"))) + 1


def parse_line(text: str, *, now: datetime) -> tuple[int | str | None, int | str | None, dict]:
    """Check one line; return (id, superseded_by, model fields) or raise ``BadLine``."""
    if "\x00" in text:
        raise BadLine("contains a NUL byte")
    try:
        record = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise BadLine(f"not JSON ({error.msg} at column {_column(text, error.pos)})")
    if not isinstance(record, dict):
        raise BadLine("not a JSON object")
    unknown = sorted(set(record) - FIELDS)
    if unknown:
        raise BadLine(f"unknown field {unknown[0]!r}")
    # Only an escaped \u0000 can still hide a NUL; look deeper only when one appears.
    if "\\u0000" in text and _contains_nul(record):
        raise BadLine("contains a NUL byte (\\u0000)")

    content = record.get("content")
    if not isinstance(content, str) or not content.strip():
        raise BadLine("missing content")
    try:
        check_content(content)
    except BlankContent:
        raise BadLine("content has no visible text (only spaces or invisible characters)")
    except TooLong as error:
        raise BadLine(
            f"content is {len(content)} characters long; at most {error.limit} are accepted"
        )
    except InvalidMemory as error:
        raise BadLine(f"content: {error.message}")
    memory_type = _choice(record, "type", TYPES, default=None)
    status = _choice(record, "status", STATUSES, default=DEFAULT_STATUS)
    source = _choice(record, "source", SOURCES, default=DEFAULT_SOURCE)
    dates = {name: _date(record, name) for name in DATE_FIELDS}

    key = _label(record, "id")
    successor_key = _label(record, "superseded_by")
    if status == Memory.Status.SUPERSEDED and successor_key is None:
        raise BadLine("status is superseded but superseded_by names no successor")
    # A redacted row keeps the successor it had, if any.
    if status not in CHAINED_STATUSES and successor_key is not None:
        raise BadLine(f"superseded_by is set but status is {status}, not superseded")
    if successor_key is not None and successor_key == key:
        raise BadLine("a memory cannot supersede itself")
    entities = _entities(record)
    embedding = _embedding(record)
    if status == Memory.Status.REDACTED and (
        content != REDACTED_CONTENT or entities or embedding is not None
    ):
        raise BadLine(
            f"status is redacted, so content must be {REDACTED_CONTENT!r} "
            "with no entities and no embedding"
        )

    return (
        key,
        successor_key,
        {
            "content": content,
            "type": memory_type,
            "status": status,
            "entity_refs": entities,
            "confidence": _confidence(record),
            "created_at": dates["created_at"] or now,
            "last_confirmed_at": dates["last_confirmed_at"],
            "last_retrieved_at": dates["last_retrieved_at"],
            "source": source,
            "session_id": _session_id(record),
            "metadata": _metadata(record),
            "embedding": embedding,
            "about": _about(record),
        },
    )


def _about(record: dict) -> About | None:
    """The line's ``about``, kept as the file says (an export carries the
    owner's corrections); None when absent, and then derived from the text."""
    if record.get("about") is None:
        return None
    try:
        return checked_about(record["about"], set_by=SET_BY_IMPORT)
    except ValueError as error:
        raise BadLine(str(error))


def _contains_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_contains_nul(item) for item in value)
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _choice(record: dict, name: str, allowed: tuple[str, ...], *, default: str | None) -> str:
    value = record.get(name)
    if value is None:
        if default is None:
            raise BadLine(f"missing {name} (one of {', '.join(allowed)})")
        return default
    if value not in allowed:
        raise BadLine(f"unknown {name} {value!r} (one of {', '.join(allowed)})")
    return value


def _date(record: dict, name: str) -> datetime | None:
    value = record.get(name)
    if value is None:
        return None
    parsed = None
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip())
        except ValueError:
            parsed = None
    if parsed is None:
        raise BadLine(f"{name} {value!r} is not an ISO 8601 date and time")
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _label(record: dict, name: str) -> int | str | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise BadLine(f"{name} must be an integer or a non-empty string")
    return value


def _entities(record: dict) -> list[str] | None:
    """The line's entities; None when it has no ``entities`` key (the store then
    finds them in the text), so an export's ``[]`` imports as no entities."""
    value = record.get("entities")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadLine("entities must be a list of strings")
    try:
        return check_entities(value)
    except InvalidMemory as error:
        raise BadLine(f"entities: {error.message}")


def _confidence(record: dict) -> float:
    value = record.get("confidence")
    if value is None:
        return DEFAULT_CONFIDENCE
    if not _is_number(value) or not 0 <= value <= 1:
        raise BadLine(f"confidence {value!r} is not a number from 0 to 1")
    return float(value)


def _session_id(record: dict) -> str:
    value = record.get("session_id")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadLine("session_id must be a string")
    if len(value) > MAX_SESSION_ID:
        raise BadLine(f"session_id is longer than {MAX_SESSION_ID} characters")
    return value


def _metadata(record: dict) -> dict:
    value = record.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadLine("metadata must be a JSON object")
    return value


def _embedding(record: dict) -> list[float] | None:
    value = record.get("embedding")
    if value is None:
        return None
    # Checked a whole vector at a time: element by element in Python, the
    # vectors of 100,000 lines took minutes of an import (docs/import-export.md).
    if not isinstance(value, list) or not set(map(type, value)) <= NUMBER_TYPES:
        raise BadLine("embedding must be a list of numbers")
    if len(value) != settings.EMBEDDING_DIMENSIONS:
        raise BadLine(
            f"embedding has {len(value)} dimensions; this service stores "
            f"{settings.EMBEDDING_DIMENSIONS} (TIMOTHY_EMBEDDING_DIMENSIONS)"
        )
    # Stored as float32: anything beyond its range would fail the whole insert.
    try:
        vector = np.array(value, dtype=np.float64)
    except OverflowError:  # an integer beyond any float
        raise BadLine("embedding contains a number too large to store")
    if not (np.isfinite(vector).all() and (np.abs(vector) <= FLOAT32_MAX).all()):
        raise BadLine("embedding contains a number too large to store")
    return vector.tolist()


# --- chains across lines ---------------------------------------------------------


def resolve_chains(
    parsed: list[ParsedLine],
    failed_keys: dict[int | str, int],
    unreadable: UnreadableLines | None = None,
) -> None:
    """Give each line its depth below its chain's head, or an error.

    A superseded line needs its successor among the good lines of the file; a
    line whose successor fails fails too, and so does a cycle. ``failed_keys``
    maps the ids of lines that were JSON but failed to their line numbers;
    ``unreadable`` says which lines were not JSON at all (the message of a
    line whose successor is missing names them).
    """
    unreadable = unreadable or UnreadableLines()
    by_key: dict[int | str, ParsedLine] = {}
    for item in parsed:
        if item.key is None:
            continue
        if item.key in by_key:
            item.error = f"id {item.key!r} is already used on line {by_key[item.key].line}"
        else:
            by_key[item.key] = item

    for start in parsed:
        path: list[ParsedLine] = []
        on_path: set[int] = set()
        node = start
        while node.depth is None and not node.error:
            if node.line in on_path:
                cycle_start = next(i for i, p in enumerate(path) if p.line == node.line)
                for member in path[cycle_start:]:
                    member.error = "its superseded_by chain goes round in a cycle"
                path = path[:cycle_start]
                break
            if node.successor_key is None:
                node.depth = 0
                break
            successor = by_key.get(node.successor_key)
            if successor is None:
                if node.successor_key in failed_keys:
                    node.error = _successor_failed(node, failed_keys[node.successor_key])
                elif node.successor_key in unreadable.keys:
                    line = unreadable.keys[node.successor_key]
                    node.error = (
                        f"its successor {node.successor_key!r} (line {line}, "
                        "which could not be read) failed"
                    )
                elif unreadable.lines:
                    node.error = (
                        f"superseded_by {node.successor_key!r} is not the id of any line "
                        f"that could be read; {unreadable.describe()}"
                    )
                else:
                    node.error = (
                        f"superseded_by {node.successor_key!r} is not the id of a line in this file"
                    )
                break
            path.append(node)
            on_path.add(node.line)
            node = successor
        for member in reversed(path):
            successor = by_key[member.successor_key]
            if successor.error:
                member.error = _successor_failed(member, successor.line)
            else:
                member.depth = successor.depth + 1


def _successor_failed(item: ParsedLine, successor_line: int) -> str:
    return f"its successor {item.successor_key!r} (line {successor_line}) failed"


# Unreadable lines named in one message; the rest are counted.
UNREADABLE_NAMED = 3
# The "id" of a line that is not JSON, when it still reads as one (an export
# writes it first).
_ID_IN_BROKEN_LINE = re.compile(r'^\s*\{\s*"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")')


@dataclass
class UnreadableLines:
    """Lines that were not JSON (or not UTF-8): the ids some of them still show,
    and the numbers of the others."""

    keys: dict[int | str, int] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)

    def add(self, number: int, text: str) -> None:
        found = _ID_IN_BROKEN_LINE.match(text)
        try:
            key = json.loads(found.group(1)) if found else None
        except json.JSONDecodeError:
            key = None
        if key is not None and key != "":
            self.keys.setdefault(key, number)
        else:
            self.lines.append(number)

    def describe(self) -> str:
        if len(self.lines) == 1:
            return f"line {self.lines[0]} could not be read and may be it"
        named = ", ".join(str(number) for number in self.lines[:UNREADABLE_NAMED])
        more = len(self.lines) - UNREADABLE_NAMED
        named += f" and {more} more" if more > 0 else ""
        return f"lines {named} could not be read and one of them may be it"


# --- import ----------------------------------------------------------------------


def read_lines(
    lines: Iterable[bytes | str], *, now: datetime, on_line: Callable[[int], None] | None = None
) -> tuple[list[ParsedLine], list[LineError]]:
    """Parse every line; blank lines are skipped. ``on_line`` gets each line's size."""
    parsed: list[ParsedLine] = []
    errors: list[LineError] = []
    failed_keys: dict[int | str, int] = {}
    unreadable = UnreadableLines()
    for number, raw in enumerate(lines, start=1):
        if on_line is not None:
            on_line(len(raw))
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            errors.append(LineError(number, "not valid UTF-8"))
            unreadable.add(number, raw.decode("utf-8", "replace"))
            continue
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        try:
            key, successor_key, fields = parse_line(text, now=now)
        except BadLine as error:
            errors.append(LineError(number, str(error)))
            if _is_json(text):
                key = _key_of_bad_line(text)
                if key is not None:
                    failed_keys.setdefault(key, number)
            else:
                unreadable.add(number, text)
            continue
        parsed.append(ParsedLine(number, key, successor_key, fields))
    resolve_chains(parsed, failed_keys, unreadable)
    errors.extend(LineError(item.line, item.error) for item in parsed if item.error)
    errors.sort(key=lambda error: error.line)
    return parsed, errors


def _is_json(text: str) -> bool:
    try:
        json.loads(text, parse_constant=lambda name: None)
    except json.JSONDecodeError:
        return False
    return True


def _key_of_bad_line(text: str) -> int | str | None:
    """The id of a line that failed, if it has one, to explain its predecessors' failure."""
    try:
        record = json.loads(text, parse_constant=_refuse_constant)
    except (json.JSONDecodeError, BadLine):
        return None
    key = record.get("id") if isinstance(record, dict) else None
    return key if isinstance(key, int | str) and not isinstance(key, bool) else None


def import_memories(
    lines: Iterable[bytes | str],
    owner,
    *,
    source_name: str = "",
    progress_total: int | None = None,
    progress_file: IO[str] | None = None,
) -> ImportResult:
    """Import the good lines for ``owner`` in one transaction; report the bad ones.

    ``progress_total`` (bytes) turns on progress bars, written to ``progress_file``
    (stderr by default).
    """
    now = timezone.now()
    show = progress_total is not None
    out = progress_file or sys.stderr
    with tqdm(
        total=progress_total, unit="B", unit_scale=True, desc="Reading", disable=not show, file=out
    ) as bar:
        parsed, errors = read_lines(lines, now=now, on_line=bar.update)
    good = [item for item in parsed if not item.error]
    result = ImportResult(imported=len(good), errors=errors)
    new_vectors = sum(
        1
        for item in good
        if item.fields["embedding"] is not None and item.status == Memory.Status.ACTIVE
    )
    started = time.perf_counter()
    # A large load with vectors goes in without the HNSW graph, built once after.
    with vector_index_paused(new_vectors) as index:
        with tqdm(
            total=len(good), unit=" memories", desc="Writing", disable=not show, file=out
        ) as bar:
            _insert(good, owner, source_name=source_name, now=now, on_batch=bar.update)
        result.write_seconds = time.perf_counter() - started
        if index["paused"] and show:
            out.write("Building the vector index once for the whole table…\n")
    result.index_seconds = index["index_seconds"]
    return result


def _insert(
    good: list[ParsedLine],
    owner,
    *,
    source_name: str,
    now: datetime,
    on_batch: Callable[[int], None],
) -> None:
    """COPY the memories and their events in; ids come from the table's sequence up front.

    Rows go in heads first, then level by level: the check constraint and the
    successor trigger need a superseded row's successor to exist already, and
    a row-level trigger sees the rows the same COPY wrote before it. The
    retrieval app's entity dictionary is counted once for the whole COPY, by a
    statement-level trigger (retrieval/migrations/0003).
    """
    reason = (f"imported from {source_name}" if source_name else "imported")[:MAX_REASON_CHARS]
    # Lines without entities get what the store finds in their text, as any
    # memory written without them does: names the owner's memories or this
    # file already carry, and proper nouns (retrieval/entities.py).
    finder = EntityFinder(known=owner_entity_keys(owner.pk))
    for item in good:
        finder.learn(item.fields["entity_refs"] or ())
    owner_names = owner_names_of(owner)
    # Whom the store names, and then whom each line names, in the order written:
    # "Akosua" in a later line is "mother Akosua" once one has said so.
    known = known_subjects_of(owner.pk)
    with transaction.atomic(), connection.cursor() as cursor:
        # In file order, so an export lists the memories in the order they came.
        ids = sorted(_reserve_ids(cursor, len(good)))
        pk_of = {item.line: pk for item, pk in zip(good, ids, strict=True)}
        pk_of_key = {item.key: pk_of[item.line] for item in good if item.key is not None}
        in_order = sorted(good, key=lambda item: (item.depth, item.line))
        with cursor.cursor.copy(_copy_sql(Memory, MEMORY_COLUMNS)) as copy:
            for written, item in enumerate(in_order, start=1):
                fields = item.fields
                entities = fields["entity_refs"]
                if entities is None:
                    entities = fit_entities(finder.find(fields["content"]))
                    finder.learn(entities)
                copy.write_row(
                    (
                        pk_of[item.line],
                        owner.pk,
                        fields["type"],
                        fields["content"],
                        fields["status"],
                        entities,
                        None if fields["embedding"] is None else vector_text(fields["embedding"]),
                        fields["confidence"],
                        fields["source"],
                        fields["session_id"],
                        json.dumps(fields["metadata"]),
                        fields["created_at"],
                        fields["last_confirmed_at"],
                        pk_of_key[item.successor_key] if item.depth else None,
                        *_about_columns(fields, entities, owner_names, known),
                    )
                )
                if written % BATCH_SIZE == 0:
                    on_batch(BATCH_SIZE)
            on_batch(len(in_order) % BATCH_SIZE)

        with cursor.cursor.copy(_copy_sql(RetrievalStamp, STAMP_COLUMNS)) as copy:
            for item in good:
                if item.fields["last_retrieved_at"] is not None:
                    copy.write_row((pk_of[item.line], owner.pk, item.fields["last_retrieved_at"]))

        with cursor.cursor.copy(_copy_sql(MemoryEvent, EVENT_COLUMNS)) as copy:
            for item in good:
                copy.write_row(
                    (
                        pk_of[item.line],
                        owner.pk,
                        MemoryEvent.Action.IMPORTED.value,
                        "import",
                        reason,
                        json.dumps(_event_data(item)),
                        now,
                    )
                )


def _about_columns(
    fields: dict, entities: list[str], owner_names: tuple[str, ...], known: KnownSubjects
) -> tuple[str, ...]:
    about = fields["about"] or derive_about(
        fields["content"],
        fields["type"],
        entities=entities,
        written=fields["created_at"],
        owner_names=owner_names,
        known=known,
    )
    if fields["status"] == Memory.Status.REDACTED:
        # A redacted row keeps nothing its text said.
        return ("", "", "", "", "")
    known.learn_memory(about, fields["content"])
    return tuple(about_fields(about)[column] for column in ABOUT_COLUMNS)


def _event_data(item: ParsedLine) -> dict[str, Any]:
    """Where the memory came from: its line, and its id in the file if it had one."""
    return {"line": item.line} if item.key is None else {"line": item.line, "id": item.key}


MEMORY_COLUMNS = (
    "id",
    "owner",
    "type",
    "content",
    "status",
    "entity_refs",
    "embedding",
    "confidence",
    "source",
    "session_id",
    "metadata",
    "created_at",
    "last_confirmed_at",
    "superseded_by",
    "about_subject",
    "about_kind",
    "about_aspect",
    "about_occasion",
    "about_set_by",
)
ABOUT_COLUMNS = MEMORY_COLUMNS[-5:]
STAMP_COLUMNS = ("memory", "owner", "last_retrieved_at")
EVENT_COLUMNS = ("memory", "owner", "action", "via", "reason", "data", "at")


def _copy_sql(model, field_names: tuple[str, ...]) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in field_names)
    return f"COPY {quote(model._meta.db_table)} ({columns}) FROM STDIN"


def _reserve_ids(cursor, count: int) -> list[int]:
    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
        [Memory._meta.db_table, count],
    )
    return [row[0] for row in cursor.fetchall()]


# --- export ----------------------------------------------------------------------


def memory_record(memory: Memory) -> dict[str, Any]:
    """One memory as an export line.

    A redacted memory is written as the database holds it: the stub for
    content, no entities, no embedding, status redacted.
    """
    return memory_to_dict(memory, EXPORT_FIELDS)


def export_lines(owner) -> Iterator[str]:
    """Every memory of ``owner``, oldest id first, one JSON line each (no newline)."""
    memories = (
        Memory.objects.for_owner(owner)
        .defer("tsv")  # derived from content; import recomputes it
        .select_related("retrieval_stamp")
        .order_by("id")
        .iterator(chunk_size=BATCH_SIZE)
    )
    for memory in memories:
        yield json.dumps(memory_record(memory), ensure_ascii=False).translate(LINE_BREAKS_ESCAPED)
