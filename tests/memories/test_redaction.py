"""Nothing of a redacted text survives in the database, its files or the logs.

A unique marker goes everywhere a memory's text can go: content, entities, an
idempotent API create whose key and body carry it, an edit whose reason quotes
it, a merge, another memory's event that quotes a version whole, an admin log
entry and the task record of the extraction that proposed it. After the
redaction every text, JSON, array, tsvector and bytea column of every table
(enumerated from the catalog) is searched for it.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.management import call_command
from django.db import connection
from django_q.models import Task
from django_q.tasks import async_task

from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.fakes.openai_server import chat_answer

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = "/v1/chat/completions"
SEARCHED_TYPES = ("text", "character varying", "character", "json", "jsonb", "ARRAY", "bytea")


def new_marker() -> str:
    # Letters then digits: the English parser keeps it whole as one lexeme.
    return f"zqx{uuid.uuid4().hex[:10]}7"


def columns_holding(marker: str) -> dict[str, int]:
    """Every column of every table that holds the marker, with how many rows do."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_schema, c.table_name, c.column_name, c.data_type, c.udt_name
            FROM information_schema.columns AS c
            JOIN information_schema.tables AS t USING (table_schema, table_name)
            WHERE t.table_type = 'BASE TABLE'
              AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
              AND (c.data_type = ANY(%s) OR c.udt_name = 'tsvector')
            """,
            [list(SEARCHED_TYPES)],
        )
        columns = cursor.fetchall()
        assert len(columns) > 50  # the enumeration found the schema
        found = {}
        quote = connection.ops.quote_name
        for schema, table, column, data_type, _ in columns:
            name = f"{quote(schema)}.{quote(table)}"
            if data_type == "bytea":
                condition = f"position(convert_to(%s, 'UTF8') in {quote(column)}) > 0"
            else:
                condition = f"strpos(lower({quote(column)}::text), %s) > 0"
            cursor.execute(f"SELECT count(*) FROM {name} WHERE {condition}", [marker])
            count = cursor.fetchone()[0]
            if count:
                found[f"{table}.{column}"] = count
    return found


def task_records_holding(marker: str) -> int:
    """django-q keeps task arguments pickled (base64 text): look inside them."""
    return sum(marker in repr((t.args, t.kwargs, t.result)).lower() for t in Task.objects.all())


@pytest.fixture
def marked(alice, alice_api, fake_llm, caplog):
    """A chain that carries the marker everywhere; returns (marker, head, bystander)."""
    caplog.set_level(logging.DEBUG)
    marker = new_marker()
    created = alice_api.post(
        "/v1/memories",
        {
            "content": f"The safe code is {marker}.",
            "type": "semantic",
            "mode": "remember",
            "entities": [marker.upper(), "safe"],
        },
        headers={"Idempotency-Key": f"remember-{marker}"},
    ).json()
    edited = alice_api.post(
        f"/v1/memories/{created['id']}",
        {
            "action": "supersede",
            "content": f"The safe code {marker} is now 1234.",
            "reason": f"was {marker}",
        },
        headers={"Idempotency-Key": f"edit-{marker}"},
    ).json()
    # The extraction that proposed a related fact keeps the conversation in its task record.
    fake_llm.queue(
        CHAT,
        chat_answer(
            {
                "facts": [
                    {
                        "type": "semantic",
                        "content": "Keeps the safe in the study.",
                        "entities": ["study"],
                        "confidence": 0.9,
                        "turn": 0,
                    }
                ]
            }
        ),
    )
    async_task(
        "memories.tasks.extract_conversation",
        alice.pk,
        "chat-safe",
        "turn_end",
        [{"role": "user", "content": f"My safe is in the study, code {marker}", "at": None}],
    )
    extracted = Memory.objects.get(owner=alice, session_id="chat-safe")
    extracted.confirm(actor=alice)
    canonical = Memory.merge(
        [edited["id"], extracted.pk],
        f"The safe in the study has code {marker}.",
        reason=f"both about {marker}",
    )
    bystander = Memory.remember(alice, "Keeps receipts in a shoebox.", Memory.Type.SEMANTIC)
    bystander.archive(actor=alice, reason=f"see 'the safe code is {marker}.'")
    LogEntry.objects.log_actions(
        alice.pk, [Memory.objects.get(pk=created["id"])], CHANGE, change_message=f"[{marker}]"
    )
    with connection.cursor() as cursor:
        # Column statistics sample values: let them hold the marker too.
        cursor.execute("ANALYZE")
    return marker, canonical, bystander


def test_it_leaves_nothing_of_the_text_in_the_database_or_the_logs(
    alice_api, alice, marked, caplog
):
    marker, head, bystander = marked
    before = columns_holding(marker)
    # The search finds what it looks for.
    assert {
        "memories_memory.content",
        "memories_memory.entity_refs",
        "memories_memory.tsv",
        "memories_memoryevent.reason",
        "memories_idempotencyrecord.response_body",
        "retrieval_posting.term",
        "retrieval_ownerentity.key",
        "django_admin_log.object_repr",
    } <= set(before)
    assert task_records_holding(marker)

    response = alice_api.post(
        f"/v1/memories/{head.pk}", {"action": "redact", "chain": True, "reason": "asked to forget"}
    )

    assert response.status_code == 200, response.text
    assert columns_holding(marker) == {}
    assert task_records_holding(marker) == 0
    # Nothing logged it, from the first write to the vacuum.
    records = caplog.get_records("setup") + caplog.get_records("call")
    assert records
    assert not [r for r in records if marker in (r.getMessage() + str(r.args)).lower()]
    # The bystander keeps its own text; only the quote in its event went.
    bystander.refresh_from_db()
    assert bystander.content == "Keeps receipts in a shoebox."
    archived = MemoryEvent.objects.get(memory=bystander, action=MemoryEvent.Action.ARCHIVED)
    assert archived.reason == REDACTED_CONTENT
    assert set(
        Memory.objects.filter(owner=alice).exclude(pk=bystander.pk).values_list("status", flat=True)
    ) == {Memory.Status.REDACTED}


def test_it_vacuums_and_analyzes_what_it_touched_once_committed(alice_api, alice, marked):
    _, head, _ = marked
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        started = cursor.fetchone()[0]

    alice_api.post(
        f"/v1/memories/{head.pk}", {"action": "redact", "chain": True, "reason": "asked to forget"}
    )

    touched = [
        "memories_memory",
        "memories_memoryevent",
        "memories_idempotencyrecord",
        "retrieval_posting",
        "retrieval_ownerentity",
        "django_admin_log",
        "django_q_task",
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT relname, last_vacuum >= %s, last_analyze >= %s FROM pg_stat_user_tables "
            "WHERE relname = ANY(%s) ORDER BY relname",
            [started, started, touched],
        )
        # (Whether each dead version could be removed depends on the snapshots
        # other sessions hold at that moment, autovacuum's included.)
        assert cursor.fetchall() == [(name, True, True) for name in sorted(touched)]


def test_with_vacuum_full_no_byte_of_it_is_left_in_the_database_files(alice, marked):
    marker, head, _ = marked
    assert relation_files_holding(marker)  # the scan finds what it looks for

    call_command(
        "redact",
        str(head.pk),
        owner="alice",
        chain=True,
        reason="asked to forget",
        vacuum_full=True,
    )

    assert relation_files_holding(marker) == []


def relation_files_holding(marker: str) -> list[str]:
    """Relations of this database (catalogs, tables, TOAST, indexes) whose files hold it.

    Written pages reach the files at a checkpoint; the embedded server runs
    the tests as a superuser, which CHECKPOINT and pg_read_binary_file need.
    """
    needle = marker.encode()
    holding = []
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute(
            "SELECT oid::regclass::text, pg_relation_filepath(oid), pg_relation_size(oid) "
            "FROM pg_class WHERE relkind IN ('r', 't', 'i', 'm') AND relpersistence = 'p'"
        )
        for name, path, size in cursor.fetchall():
            if not path or not size:
                continue
            segment, data = 0, b""
            while segment * 2**30 < size:
                suffix = f".{segment}" if segment else ""
                cursor.execute("SELECT pg_read_binary_file(%s)", [path + suffix])
                data += bytes(cursor.fetchone()[0])
                segment += 1
            if needle in data.lower():
                holding.append(name)
    return holding
