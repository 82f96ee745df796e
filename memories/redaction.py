"""Redaction: ``redact(memory, reason=..., chain=..., actor=..., via=...)`` erases
what a memory said, and everything else that holds it.

The rows are rewritten by ``redact``; the retrieval triggers take their
postings, dictionary counts and BM25 sums away as the active version leaves.
Everything else that may hold the text is scrubbed here, in the same
transaction:

- the events of the redacted versions: every reason becomes the stub, and any
  string of their data that contains the text or one of its entity names;
- the events on the other side of their transitions (a successor's "version"
  or "merged" event, a predecessor's "superseded" one), which carry the same
  reason as the redacted version's own;
- any other event or memory metadata of the owner that quotes a redacted
  text whole (ignoring case);
- idempotency records that answered with a redacted version, were an action on
  one, or quote its text (memories/idempotency.py);
- admin log entries about a redacted version or quoting its text;
- query previews in the access log of searches that delivered a redacted
  version or quote its text (memories/access_log.py);
- the task queue's record of the extraction run that proposed it, which holds
  the whole conversation;
- entity dictionary rows whose count fell to 0 (the key is the entity's name).

Events are append-only (memories 0001, 0005): the database lets a row be
rewritten only while ``timothy.redacting_owner`` names its owner, only in
reason and data, and only by replacing text with the stub.

Once the transaction commits, ``vacuum`` removes the old row versions that
still hold the text from the tables it touched (VACUUM cannot run inside a
transaction); see docs/privacy.md for what plain VACUUM leaves and
``redact --vacuum-full``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Q

from memories import signals
from memories.about import About, about_fields
from memories.access_log import scrub_for_redaction
from memories.idempotency_records import REDACTED_REQUEST, IdempotencyRecord
from memories.memory_json import memory_to_dict
from memories.models import (
    REDACTED_CONTENT,
    IllegalTransition,
    Memory,
    MemoryEvent,
    RedactionRefused,
)

logger = logging.getLogger(__name__)

# The setting the event log's trigger reads (memories migration 0005).
REDACTING_OWNER_SETTING = "timothy.redacting_owner"
EXTRACTION_TASK = "memories.tasks.extract_conversation"
# PostgreSQL 18's way for a table's owner to drop its column statistics.
CLEAR_STATISTICS = "pg_clear_attribute_stats(text,text,text,boolean)"


@dataclass
class Redaction:
    """What one redaction did, for the caller's summary."""

    memory_ids: list[int]
    events_scrubbed: int = 0
    metadata_scrubbed: int = 0
    idempotency_records: int = 0
    admin_log_entries: int = 0
    extraction_runs: int = 0
    dictionary_keys: int = 0
    tables: list[str] = field(default_factory=list)

    def summary(self) -> str:
        versions = len(self.memory_ids)
        parts = [f"{versions} version{'s' if versions != 1 else ''}"]
        for count, what in (
            (self.events_scrubbed, "events scrubbed"),
            (self.metadata_scrubbed, "memory metadata scrubbed"),
            (self.idempotency_records, "idempotency records scrubbed"),
            (self.admin_log_entries, "admin log entries scrubbed"),
            (self.extraction_runs, "extraction task records removed"),
            (self.dictionary_keys, "entity names removed from the dictionary"),
        ):
            if count:
                parts.append(f"{count} {what}")
        return ", ".join(parts)


# --- the memory rows ------------------------------------------------------------------


def redact(
    memory: Memory, *, reason: str, chain: bool = False, actor=None, via: str = "api"
) -> Redaction:
    """Erase what ``memory`` said, for good; with ``chain``, every version of its chain.

    Each row stays where it is in its chain, with status redacted, the stub
    for content, and no entities, embedding or text in its metadata; a
    ``redacted`` event records who, when and why (the reason may not quote
    the text or name its entities). The retrieval triggers take the
    postings, entity counts and BM25 sums of an active version away;
    ``erase_copies`` scrubs every other copy in the same transaction.
    After commit the touched tables are vacuumed by a background task.
    """
    reason = " ".join((reason or "").split())
    if not reason:
        raise RedactionRefused("reason_required", "A redaction needs a reason, for the record.")
    with transaction.atomic():
        rows = _lock_versions(memory, chain)
        row = next(r for r in rows if r.pk == memory.pk)
        pending = [r for r in rows if r.status != Memory.Status.REDACTED]
        if row.status == Memory.Status.REDACTED and not chain:
            raise IllegalTransition(row, "redact")
        if not pending:
            raise IllegalTransition(row, "redact", "so is every version of its chain")
        texts = {r.pk: r.content for r in pending}
        entities = {r.pk: list(r.entity_refs) for r in pending}
        if quotes(reason, needles_of(texts.values())):
            raise RedactionRefused(
                "reason_quotes_text",
                "The reason quotes the text being erased, and the reason is kept: "
                "say why without it.",
            )
        if names_any(reason, [e for names in entities.values() for e in names]):
            raise RedactionRefused(
                "reason_quotes_text",
                "The reason names an entity of the memory being erased, and the reason "
                "is kept: say why without it.",
            )
        was_active = any(r.status == Memory.Status.ACTIVE for r in pending)
        events = []
        for version in pending:
            previous = version.status
            version.status = Memory.Status.REDACTED
            version.content = REDACTED_CONTENT
            version.entity_refs = []
            version.embedding = None
            # What it was about names people and things the text said.
            for name in about_fields(About()):
                setattr(version, name, "")
            version.metadata = scrub(
                version.metadata,
                needles_of([texts[version.pk], *entities[version.pk]]),
            )
            version.save(
                update_fields=[
                    "status",
                    "content",
                    "entity_refs",
                    "embedding",
                    "metadata",
                    *about_fields(About()),
                ]
            )
            events.append(
                version.log(
                    MemoryEvent.Action.REDACTED,
                    actor=actor,
                    via=via,
                    reason=reason,
                    data={"from": previous, "chain": chain},
                )
            )
        result = Redaction(memory_ids=[r.pk for r in pending])
        erase_copies(
            row.owner_id,
            pending,
            texts,
            entities,
            result,
            was_active=was_active,
            skip_events=[event.pk for event in events],
        )
        transaction.on_commit(lambda: vacuum_soon(result.tables))
    memory._refresh_from(row)
    return result


def _lock_versions(memory: Memory, chain: bool) -> list[Memory]:
    """Lock ``memory``'s row, or every version of its chain, and return them fresh."""
    locked: set[int] = set()
    while True:
        wanted = {m.pk for m in Memory.objects.chain(memory.pk)} if chain else {memory.pk}
        if wanted <= locked:
            break
        # In id order, so two redactions of one chain cannot deadlock.
        list(Memory.objects.select_for_update().filter(pk__in=wanted - locked).order_by("pk"))
        # A version written meanwhile (by a supersede holding the head) is locked next round.
        locked |= wanted
    return list(Memory.objects.filter(pk__in=wanted).order_by("created_at", "id"))


# --- matching ------------------------------------------------------------------------


def needles_of(texts: Iterable[str]) -> list[str]:
    """Lower-cased texts to look for, longest first, without blanks or repeats."""
    found = {text.strip().lower() for text in texts if text and text.strip()}
    return sorted(found, key=lambda text: (-len(text), text))


def quotes(text: str, needles: Sequence[str]) -> bool:
    low = text.lower()
    return any(needle in low for needle in needles)


def names_any(text: str, names: Iterable[str]) -> str | None:
    """The first of ``names`` that ``text`` mentions as a whole word (ignoring case)."""
    for name in names:
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return name
    return None


def scrub(value: Any, needles: Sequence[str]) -> Any:
    """``value`` with every string that contains a needle replaced by the stub."""
    if isinstance(value, str):
        return REDACTED_CONTENT if quotes(value, needles) else value
    if isinstance(value, dict):
        return {key: scrub(item, needles) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item, needles) for item in value]
    return value


# --- the scrubbing -------------------------------------------------------------------


def erase_copies(
    owner_id: int,
    redacted: list[Memory],
    texts: dict[int, str],
    entities: dict[int, list[str]],
    result: Redaction,
    *,
    was_active: bool,
    skip_events: Sequence[int] = (),
) -> None:
    """Scrub every copy of the redacted texts outside the memory rows (see above).

    ``texts`` and ``entities`` are what each redacted version said before,
    ``was_active`` whether one of them was active (it had postings);
    ``skip_events`` the redaction's own events.
    """
    ids = [memory.pk for memory in redacted]
    # Extraction's conversations: a proposal confirmed on the pages took the
    # source page, and its confirmed event keeps what it was proposed as.
    sessions = {m.session_id for m in redacted if m.source == Memory.Source.EXTRACTION}
    sessions.update(
        MemoryEvent.objects.filter(
            owner_id=owner_id,
            memory__in=ids,
            action=MemoryEvent.Action.CONFIRMED,
            data__proposed_source=Memory.Source.EXTRACTION,
        ).values_list("memory__session_id", flat=True)
    )
    all_needles = needles_of([*texts.values(), *(e for names in entities.values() for e in names)])
    text_needles = needles_of(texts.values())
    tables = {Memory._meta.db_table}
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [REDACTING_OWNER_SETTING, str(owner_id)])
    try:
        result.events_scrubbed = _scrub_events(
            owner_id, ids, all_needles, text_needles, skip_events
        )
        if result.events_scrubbed:
            tables.add(MemoryEvent._meta.db_table)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, '', true)", [REDACTING_OWNER_SETTING])

    result.metadata_scrubbed = _scrub_other_metadata(owner_id, ids, text_needles)

    result.idempotency_records = _scrub_idempotency_records(owner_id, redacted, text_needles)
    if result.idempotency_records:
        tables.add(IdempotencyRecord._meta.db_table)

    result.admin_log_entries = _scrub_admin_log(ids, text_needles)
    if result.admin_log_entries:
        from django.contrib.admin.models import LogEntry

        tables.add(LogEntry._meta.db_table)

    # The access log's query previews of searches that delivered it or quote it.
    tables.update(scrub_for_redaction(owner_id, ids, text_needles))

    result.extraction_runs = _forget_extraction_runs(owner_id, sessions - {""})
    if result.extraction_runs:
        from django_q.models import Task

        tables.add(Task._meta.db_table)

    # The index above the store forgets the names (retrieval's hook, set when it loads).
    keys = {name.lower() for names in entities.values() for name in names}
    result.dictionary_keys, index_tables = signals.forget_redacted_names(owner_id, keys, was_active)
    tables.update(index_tables)
    result.tables = sorted(tables)


def _scrub_events(
    owner_id: int,
    ids: list[int],
    all_needles: list[str],
    text_needles: list[str],
    skip_events: Sequence[int],
) -> int:
    events = MemoryEvent.objects.filter(owner_id=owner_id).exclude(pk__in=skip_events)
    # The versions' own events, and the other side of their transitions: the same reason.
    paired = Q(data__successor__in=ids) | reduce(
        or_, (Q(data__supersedes__contains=[pk]) for pk in ids)
    )
    own = list(events.filter(Q(memory_id__in=ids) | paired))
    quoted = list(
        events.exclude(pk__in=[event.pk for event in own]).filter(
            pk__in=_events_quoting(owner_id, text_needles)
        )
    )
    changed = 0
    for event in own:
        changed += _rewrite_event(
            event, REDACTED_CONTENT if event.reason else "", scrub(event.data, all_needles)
        )
    for event in quoted:
        reason = REDACTED_CONTENT if quotes(event.reason, text_needles) else event.reason
        changed += _rewrite_event(event, reason, scrub(event.data, text_needles))
    return changed


def _events_quoting(owner_id: int, needles: list[str]) -> list[int]:
    """Ids of the owner's events whose reason or any string in data contains a needle."""
    if not needles:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT e.id FROM {MemoryEvent._meta.db_table} AS e
            WHERE e.owner_id = %(owner)s AND EXISTS (
                SELECT 1 FROM unnest(%(needles)s::text[]) AS n
                WHERE strpos(lower(e.reason), n) > 0 OR EXISTS (
                    SELECT 1 FROM jsonb_path_query(e.data, 'strict $.**') AS v
                    WHERE jsonb_typeof(v) = 'string' AND strpos(lower(v #>> '{{}}'), n) > 0
                )
            )
            """,
            {"owner": owner_id, "needles": needles},
        )
        return [row[0] for row in cursor.fetchall()]


def _rewrite_event(event: MemoryEvent, reason: str, data: Any) -> int:
    if reason == event.reason and data == event.data:
        return 0
    MemoryEvent.objects.filter(pk=event.pk).update(reason=reason, data=data)
    return 1


def _scrub_other_metadata(owner_id: int, ids: list[int], needles: list[str]) -> int:
    """Metadata of the owner's other memories that quotes a redacted text whole."""
    if not needles:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT m.id FROM {Memory._meta.db_table} AS m
            WHERE m.owner_id = %(owner)s AND m.status <> 'redacted' AND m.metadata <> '{{}}'
              AND NOT (m.id = ANY(%(ids)s)) AND EXISTS (
                SELECT 1 FROM unnest(%(needles)s::text[]) AS n,
                     jsonb_path_query(m.metadata, 'strict $.**') AS v
                WHERE jsonb_typeof(v) = 'string' AND strpos(lower(v #>> '{{}}'), n) > 0
            )
            """,
            {"owner": owner_id, "ids": ids, "needles": needles},
        )
        quoting = [row[0] for row in cursor.fetchall()]
    for memory in Memory.objects.filter(pk__in=quoting).only("metadata"):
        Memory.objects.filter(pk=memory.pk).update(metadata=scrub(memory.metadata, needles))
    return len(quoting)


def _scrub_admin_log(ids: list[int], needles: list[str]) -> int:
    """Admin log entries about a redacted version (their label quotes its text) or
    quoting a redacted text."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    about = Q(
        content_type=ContentType.objects.get_for_model(Memory),
        object_id__in=[str(pk) for pk in ids],
    )
    quoting = reduce(
        or_,
        (Q(object_repr__icontains=n) | Q(change_message__icontains=n) for n in needles),
        Q(pk__in=[]),
    )
    entries = list(LogEntry.objects.filter(about | quoting))
    about_ids = set(LogEntry.objects.filter(about).values_list("pk", flat=True))
    for entry in entries:
        # What changed on a redacted version is part of what it said.
        quoted = entry.pk in about_ids or quotes(entry.change_message, needles)
        LogEntry.objects.filter(pk=entry.pk).update(
            object_repr=REDACTED_CONTENT,
            change_message="[]" if quoted else entry.change_message,
        )
    return len(entries)


def _forget_extraction_runs(owner_id: int, sessions: set[str]) -> int:
    """Delete the task queue's records of extraction runs over these sessions: each
    holds the whole conversation it was given."""
    if not sessions:
        return 0
    from django_q.models import Task

    doomed = [
        task.pk
        for task in Task.objects.filter(func=EXTRACTION_TASK).only("id", "args")
        if _extraction_of(task.args, owner_id, sessions)
    ]
    if doomed:
        Task.objects.filter(pk__in=doomed).delete()
    return len(doomed)


def _extraction_of(args: Any, owner_id: int, sessions: set[str]) -> bool:
    return (
        isinstance(args, list | tuple)
        and len(args) >= 2
        and args[0] == owner_id
        and args[1] in sessions
    )


def _scrub_idempotency_records(owner_id: int, redacted: list[Memory], needles: list[str]) -> int:
    """Rewrite the owner's records that hold what a redaction erases; how many.

    A record answered with a redacted version (its id), was an action on one
    (its path), or quotes a redacted text (``needles``, lower-cased). Its
    answer becomes the version as it is now (or is scrubbed, if it answered
    with another memory) and its request hash goes.
    """
    by_id = {memory.pk: memory for memory in redacted}
    paths = {f"POST /v1/memories/{pk}" for pk in by_id}
    changed = 0
    for record in IdempotencyRecord.objects.filter(owner_id=owner_id):
        body = record.response_body
        answered = body.get("id") if isinstance(body, dict) else None
        text = json.dumps(body, ensure_ascii=False)
        if answered not in by_id and record.endpoint not in paths and not quotes(text, needles):
            continue
        if answered in by_id:
            body = memory_to_dict(by_id[answered])
        IdempotencyRecord.objects.filter(pk=record.pk).update(
            response_body=scrub(body, needles), request_hash=REDACTED_REQUEST
        )
        changed += 1
    return changed


# --- after commit ----------------------------------------------------------------------


def vacuum(tables: Sequence[str], *, full: bool = False) -> None:
    """VACUUM (or VACUUM FULL) and ANALYZE ``tables`` on a connection of its own.

    Plain VACUUM removes the dead row versions that still hold the text, and
    their index entries, without blocking reads or writes; VACUUM FULL rewrites
    each table and its indexes whole, so that no byte of the old versions is
    left in their files, but locks each table while it runs. ANALYZE renews the
    column statistics, which keep sample values (the text among them); the
    statistics catalog is vacuumed last, when the role may (a superuser).
    """
    known = set(connection.introspection.table_names())
    options = "(FULL, ANALYZE)" if full else "(ANALYZE)"
    own = connections[DEFAULT_DB_ALIAS].copy()
    try:
        with own.cursor() as cursor:
            cursor.execute(f"SELECT to_regprocedure('{CLEAR_STATISTICS}') IS NOT NULL")
            can_clear = cursor.fetchone()[0]
            for table in tables:
                if table not in known:
                    continue
                if can_clear:
                    # ANALYZE of a table left empty keeps the old statistics.
                    cursor.execute(
                        "SELECT pg_clear_attribute_stats(current_schema(), %s, attname, false) "
                        "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                        "AND NOT attisdropped",
                        [table, own.ops.quote_name(table)],
                    )
                cursor.execute(f"VACUUM {options} {own.ops.quote_name(table)}")
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            if cursor.fetchone()[0]:
                cursor.execute(f"VACUUM {'(FULL) ' if full else ''}pg_catalog.pg_statistic")
    finally:
        own.close()


def vacuum_soon(tables: Sequence[str]) -> None:
    """Queue the VACUUM of ``tables`` as a background task at once (run inline when
    the queue cannot take it), so that no page or API call waits for it."""
    try:
        from django_q.tasks import async_task

        async_task("memories.tasks.vacuum_after_redaction", list(tables))
    except Exception:
        logger.exception("Could not queue the vacuum after a redaction; running it now")
        vacuum(tables)
