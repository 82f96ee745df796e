"""The database keeps the invariants even when code bypasses the model methods."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from memories.models import ApiToken, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db

Status = Memory.Status


def refused(action) -> None:
    """Run ``action`` in a savepoint and assert the database refuses it."""
    with pytest.raises(DatabaseError), transaction.atomic():
        action()


@pytest.fixture
def chain(alice):
    """Lyon (superseded) → Paris (head)."""
    old = make_memory(alice, "Alice lives in Lyon.")
    new = old.supersede("Alice lives in Paris.")
    old.refresh_from_db()
    return old, new


def test_it_refuses_a_superseded_memory_without_successor(alice):
    memory = make_memory(alice)

    refused(lambda: Memory.objects.filter(pk=memory.pk).update(status=Status.SUPERSEDED))
    refused(lambda: make_memory(alice, status=Status.SUPERSEDED))

    memory.refresh_from_db()
    assert memory.status == Status.ACTIVE


def test_it_refuses_to_unlink_a_superseded_memory(chain):
    old, _ = chain

    refused(lambda: Memory.objects.filter(pk=old.pk).update(superseded_by=None))

    old.refresh_from_db()
    assert old.superseded_by_id is not None


def test_it_refuses_an_active_memory_with_a_successor(chain):
    old, new = chain

    refused(lambda: Memory.objects.filter(pk=old.pk).update(status=Status.ACTIVE))
    for status in (Status.PROPOSED, Status.REJECTED, Status.ARCHIVED):
        refused(lambda status=status: Memory.objects.filter(pk=old.pk).update(status=status))

    assert Memory.objects.for_owner(old.owner).active().get() == new


def test_it_refuses_confidence_outside_zero_to_one(alice):
    memory = make_memory(alice, confidence=0.5)

    refused(lambda: Memory.objects.filter(pk=memory.pk).update(confidence=1.5))
    refused(lambda: Memory.objects.filter(pk=memory.pk).update(confidence=-0.1))
    refused(lambda: make_memory(alice, confidence=2))

    memory.refresh_from_db()
    assert memory.confidence == 0.5


def test_it_refuses_empty_content_unknown_type_or_status(alice):
    memory = make_memory(alice)

    refused(lambda: Memory.objects.filter(pk=memory.pk).update(content=""))
    refused(lambda: Memory.objects.filter(pk=memory.pk).update(type="gossip"))
    refused(lambda: Memory.objects.filter(pk=memory.pk).update(status="deleted"))

    memory.refresh_from_db()
    assert (memory.type, memory.status) == (Memory.Type.SEMANTIC, Status.ACTIVE)


def test_it_refuses_a_memory_as_its_own_successor(alice):
    memory = make_memory(alice)

    refused(
        lambda: Memory.objects.filter(pk=memory.pk).update(
            status=Status.SUPERSEDED, superseded_by=memory.pk
        )
    )


def test_it_refuses_a_cycle(chain):
    old, new = chain
    newest = new.supersede("Alice lives in Paris, 11e.")

    refused(
        lambda: Memory.objects.filter(pk=newest.pk).update(
            status=Status.SUPERSEDED, superseded_by=old.pk
        )
    )

    assert Memory.objects.get(pk=newest.pk).status == Status.ACTIVE
    assert old.head_id() == newest.pk


def test_it_refuses_a_successor_of_another_owner(alice, bob):
    alices = make_memory(alice, "Alice lives in Lyon.")
    bobs = make_memory(bob, "Bob lives in Oslo.")

    refused(
        lambda: Memory.objects.filter(pk=alices.pk).update(
            status=Status.SUPERSEDED, superseded_by=bobs.pk
        )
    )
    refused(lambda: make_memory(bob, status=Status.SUPERSEDED, superseded_by=alices))

    assert Memory.objects.filter(status=Status.SUPERSEDED).count() == 0


def test_it_refuses_to_delete_memories_events_and_tokens_by_raw_sql(chain):
    old, new = chain
    token, _ = ApiToken.issue(old.owner)
    statements = [
        ("DELETE FROM memories_memory WHERE id = %s", new.pk),
        ("DELETE FROM memories_memory WHERE id = %s", old.pk),
        ("DELETE FROM memories_memoryevent WHERE memory_id = %s", old.pk),
        ("DELETE FROM memories_apitoken WHERE id = %s", token.pk),
    ]

    for sql, pk in statements:
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [pk])

    assert Memory.objects.filter(pk__in=[old.pk, new.pk]).count() == 2
    assert MemoryEvent.objects.filter(memory=old).exists()
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_it_refuses_a_raw_queryset_delete(alice):
    memory = make_memory(alice)
    queryset = Memory.objects.filter(pk=memory.pk)

    refused(lambda: queryset._raw_delete(queryset.db))

    assert Memory.objects.filter(pk=memory.pk).exists()


def test_it_refuses_to_update_or_delete_events(alice):
    memory = Memory.remember(alice, "Alice is left-handed.", Memory.Type.SEMANTIC)
    events = MemoryEvent.objects.filter(memory=memory)

    refused(lambda: events.update(reason="rewritten"))
    refused(lambda: events._raw_delete(events.db))

    assert events.get().reason == ""


def test_it_refuses_to_delete_an_owner_who_has_memories(alice):
    make_memory(alice)

    refused(alice.delete)

    assert Memory.objects.filter(owner=alice).exists()


def test_it_refuses_rewriting_a_memory_in_place(alice, bob):
    memory = make_memory(alice, "Alice lives in Lyon.", entities=["Lyon"])
    rows = Memory.objects.filter(pk=memory.pk)
    refused(lambda: rows.update(content="Alice lives in Paris."))
    refused(lambda: rows.update(type=Memory.Type.PREFERENCE))
    refused(lambda: rows.update(entity_refs=["Paris"]))
    refused(lambda: rows.update(owner=bob))
    memory.refresh_from_db()
    assert (memory.content, memory.owner_id, memory.entity_refs) == (
        "Alice lives in Lyon.",
        alice.pk,
        ["Lyon"],
    )
    # What may change in place still does.
    rows.update(confidence=0.4, last_confirmed_at=memory.created_at)


@pytest.mark.parametrize(
    ("start", "forbidden"),
    [
        (Status.REJECTED, Status.ACTIVE),
        (Status.REJECTED, Status.ARCHIVED),
        # archived → active is the Undo of an archive (Memory.unarchive, memories 0026).
        (Status.ARCHIVED, Status.PROPOSED),
        (Status.ACTIVE, Status.PROPOSED),
        (Status.ACTIVE, Status.REJECTED),
        (Status.PROPOSED, Status.ARCHIVED),
    ],
)
def test_it_refuses_status_changes_outside_the_state_machine(alice, start, forbidden):
    memory = make_memory(alice, status=start)
    refused(lambda: Memory.objects.filter(pk=memory.pk).update(status=forbidden))
    memory.refresh_from_db()
    assert memory.status == start


def test_it_lets_a_rejected_memory_back_into_the_queue_by_raw_sql(alice):
    # The one way back (migration 0005): restore, rejected -> proposed.
    memory = make_memory(alice, status=Status.REJECTED)
    Memory.objects.filter(pk=memory.pk).update(status=Status.PROPOSED)
    memory.refresh_from_db()
    assert memory.status == Status.PROPOSED
