"""The database enforces redaction like supersede-only, whatever code runs against it."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection, transaction

from memories import redaction
from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db

Status = Memory.Status


def refused(sql: str, params=()) -> None:
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def execute(sql: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.fixture
def redacted(alice):
    memory = make_memory(alice, "Safe combination is 31-07-22.", entities=["safe"])
    redaction.redact(memory, reason="a secret", actor=alice)
    return memory


@pytest.mark.parametrize(
    "assignment",
    [
        "content = 'Safe combination is 31-07-22.'",
        "content = 'something else'",
        "entity_refs = ARRAY['safe']",
        'metadata = \'{"note": "31-07-22"}\'',
        "type = 'preference'",
        "status = 'active'",
        "status = 'archived'",
        "embedding = array_fill(0.5, ARRAY[%(dims)s])::vector",
    ],
)
def test_it_refuses_any_rewrite_of_a_redacted_row(redacted, assignment):
    from django.conf import settings

    sql = f"UPDATE memories_memory SET {assignment} WHERE id = %(id)s"
    refused(sql, {"id": redacted.pk, "dims": settings.EMBEDDING_DIMENSIONS})

    redacted.refresh_from_db()
    assert (redacted.status, redacted.content, redacted.entity_refs) == (
        Status.REDACTED,
        REDACTED_CONTENT,
        [],
    )


def test_it_lets_a_redacted_row_be_read_and_stamped_otherwise(redacted):
    execute("UPDATE memories_memory SET confidence = 0.1 WHERE id = %s", [redacted.pk])

    redacted.refresh_from_db()
    assert redacted.confidence == 0.1


@pytest.mark.parametrize(
    "assignment",
    [
        "status = 'redacted', content = 'not the stub', entity_refs = '{}'",
        "status = 'redacted', content = '[redacted]', entity_refs = ARRAY['safe']",
        "status = 'redacted', content = '[redacted]', entity_refs = '{}', type = 'reflection'",
    ],
)
def test_a_redaction_writes_the_stub_and_nothing_else(alice, assignment):
    memory = make_memory(alice, "Safe combination is 31-07-22.", entities=["safe"])

    refused(f"UPDATE memories_memory SET {assignment} WHERE id = %s", [memory.pk])

    memory.refresh_from_db()
    assert memory.status == Status.ACTIVE


def test_a_redaction_keeps_the_successor(alice):
    old = make_memory(alice, "Lives in Lyon.")
    new = old.supersede("Lives in Paris.")

    refused(
        "UPDATE memories_memory SET status = 'redacted', content = '[redacted]', "
        "superseded_by_id = NULL WHERE id = %s",
        [old.pk],
    )
    # A raw redaction that keeps the chain is the one rewrite allowed.
    execute(
        "UPDATE memories_memory SET status = 'redacted', content = '[redacted]' WHERE id = %s",
        [old.pk],
    )
    old.refresh_from_db()
    assert (old.status, old.superseded_by_id) == (Status.REDACTED, new.pk)


def test_it_refuses_a_redacted_row_with_text_on_insert(alice):
    with pytest.raises(DatabaseError), transaction.atomic():
        make_memory(alice, "Not erased.", status=Status.REDACTED)
    with pytest.raises(DatabaseError), transaction.atomic():
        make_memory(alice, REDACTED_CONTENT, status=Status.REDACTED, entities=["x"])

    assert make_memory(alice, REDACTED_CONTENT, status=Status.REDACTED).status == Status.REDACTED


def test_events_stay_append_only_outside_a_redaction(alice, redacted):
    event = MemoryEvent.objects.filter(memory=redacted).first()

    refused("UPDATE memories_memoryevent SET reason = '[redacted]' WHERE id = %s", [event.pk])
    refused("DELETE FROM memories_memoryevent WHERE id = %s", [event.pk])


def test_a_redaction_may_only_replace_event_text_with_the_stub(alice):
    memory = make_memory(alice, "Likes tea.")
    memory.archive(reason="no longer true", actor=alice)
    event = MemoryEvent.objects.get(memory=memory)
    redacting = "SELECT set_config('timothy.redacting_owner', %s, true)"

    with transaction.atomic():
        execute(redacting, [str(alice.pk)])
        for sql, params in [
            ("UPDATE memories_memoryevent SET reason = 'rewritten' WHERE id = %s", [event.pk]),
            ("UPDATE memories_memoryevent SET action = 'created' WHERE id = %s", [event.pk]),
            ("UPDATE memories_memoryevent SET at = now() WHERE id = %s", [event.pk]),
            ("UPDATE memories_memoryevent SET actor_id = NULL WHERE id = %s", [event.pk]),
            (
                "UPDATE memories_memoryevent SET data = %s WHERE id = %s",
                [json.dumps({"from": "proposed"}), event.pk],
            ),
            (
                "UPDATE memories_memoryevent SET data = %s WHERE id = %s",
                [json.dumps({"from": "[redacted]", "extra": 1}), event.pk],
            ),
            ("DELETE FROM memories_memoryevent WHERE id = %s", [event.pk]),
        ]:
            refused(sql, params)
        # What a redaction does is allowed: text replaced by the stub.
        execute(
            "UPDATE memories_memoryevent SET reason = '[redacted]', data = %s WHERE id = %s",
            [json.dumps({"from": "[redacted]"}), event.pk],
        )

    event = MemoryEvent.objects.get(pk=event.pk)
    assert (event.reason, event.data) == (REDACTED_CONTENT, {"from": REDACTED_CONTENT})


def test_the_redaction_setting_covers_its_own_owner_only(alice, bob):
    memory = make_memory(bob, "Bob likes tea.")
    memory.archive(reason="no longer true", actor=bob)
    event = MemoryEvent.objects.get(memory=memory)

    with transaction.atomic():
        execute("SELECT set_config('timothy.redacting_owner', %s, true)", [str(alice.pk)])
        refused("UPDATE memories_memoryevent SET reason = '[redacted]' WHERE id = %s", [event.pk])

    assert MemoryEvent.objects.get(pk=event.pk).reason == "no longer true"


def test_the_redaction_setting_does_not_outlive_the_redaction(alice):
    memory = make_memory(alice, "Likes tea.")
    memory.archive(reason="no longer true", actor=alice)
    redaction.redact(make_memory(alice, "Something else."), reason="private", actor=alice)
    event = MemoryEvent.objects.get(memory=memory)

    refused("UPDATE memories_memoryevent SET reason = '[redacted]' WHERE id = %s", [event.pk])
