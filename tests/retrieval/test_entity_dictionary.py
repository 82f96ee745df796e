"""The owner's entity dictionary, kept by statement-level triggers (retrieval 0003).

After every kind of write the dictionary must hold what
``index.rebuild()`` counts from scratch. Rows whose count fell
to 0 stay (the entity leg reads ``memories > 0``); the rebuild leaves them out.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.db import connection

from memories.models import Memory
from retrieval import index
from retrieval.models import OwnerEntity
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def counted() -> dict[tuple[int, str], int]:
    rows = OwnerEntity.objects.filter(memories__gt=0).values_list("owner_id", "key", "memories")
    return {(owner, key): memories for owner, key, memories in rows}


def assert_matches_rebuild() -> dict[tuple[int, str], int]:
    """The trigger-kept counts equal a recount from scratch; return them."""
    kept = counted()
    index.rebuild()
    assert kept == counted()
    return kept


def row_versions() -> dict[tuple[int, str], str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT owner_id, key, ctid::text FROM retrieval_ownerentity")
        return {(owner, key): ctid for owner, key, ctid in cursor.fetchall()}


@contextmanager
def rewrites_allowed():
    """Let raw UPDATEs change entity_refs and owner_id, which memories 0003 forbids.

    The counter must still be right if that guard is ever off; the test's
    transaction rolls the switch back.
    """
    with connection.cursor() as cursor:
        # ALTER TABLE refuses while the set-up's deferred foreign-key checks are queued.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE memories_memory DISABLE TRIGGER memory_supersede_only")
        yield cursor
        cursor.execute("ALTER TABLE memories_memory ENABLE TRIGGER memory_supersede_only")


def test_it_counts_single_inserts(alice):
    Memory.remember(alice, "fact a", Memory.Type.SEMANTIC, entities=["Ann", "Paris"])
    Memory.remember(alice, "fact b", Memory.Type.SEMANTIC, entities=["ann"])
    Memory.propose(alice, "fact c", Memory.Type.SEMANTIC, entities=["Paris", "Rome"])
    make_memory(alice, "d", entities=["Rome"], status=Memory.Status.ARCHIVED)

    assert assert_matches_rebuild() == {(alice.pk, "ann"): 2, (alice.pk, "paris"): 1}


def test_it_counts_a_multi_row_insert(alice, bob):
    # A redacted row names no entities.
    statuses = [status for status in Memory.Status if status != Memory.Status.REDACTED]
    Memory.objects.bulk_create(
        Memory(
            owner=alice if i % 3 else bob,
            type=Memory.Type.SEMANTIC,
            content=f"m{i}",
            status=statuses[i % len(statuses)],
            entity_refs=[f"E{i % 7}", "Shared"],
        )
        for i in range(200)
        if statuses[i % len(statuses)] != Memory.Status.SUPERSEDED
    )

    kept = assert_matches_rebuild()
    active = Memory.objects.filter(status=Memory.Status.ACTIVE)
    assert kept[(alice.pk, "shared")] == active.filter(owner=alice).count()
    assert kept[(bob.pk, "shared")] == active.filter(owner=bob).count()


def test_it_counts_a_memory_once_however_it_spells_a_name(alice):
    make_memory(alice, "a", entities=["Oslo", "oslo", "OSLO", ""])
    Memory.objects.bulk_create(
        [
            Memory(
                owner=alice,
                type="semantic",
                content="b",
                status="active",
                entity_refs=["oslo", "Oslo"],
            ),
            Memory(
                owner=alice,
                type="semantic",
                content="c",
                status="active",
                entity_refs=["", "Bergen"],
            ),
        ]
    )

    assert assert_matches_rebuild() == {(alice.pk, "oslo"): 2, (alice.pk, "bergen"): 1}
    assert not OwnerEntity.objects.filter(key="").exists()


def test_it_keeps_two_owners_sharing_a_key_apart(alice, bob):
    Memory.remember(alice, "fact a", Memory.Type.SEMANTIC, entities=["Lisbon"])
    Memory.remember(alice, "fact b", Memory.Type.SEMANTIC, entities=["Lisbon"])
    lisbon = Memory.remember(bob, "fact c", Memory.Type.SEMANTIC, entities=["LISBON"])
    Memory.remember(bob, "fact d", Memory.Type.SEMANTIC, entities=["Porto"])
    lisbon.archive()

    assert OwnerEntity.objects.get(owner=bob, key="lisbon").memories == 0
    assert assert_matches_rebuild() == {(alice.pk, "lisbon"): 2, (bob.pk, "porto"): 1}


def test_it_follows_every_state_change(alice):
    first = Memory.remember(alice, "fact a", Memory.Type.SEMANTIC, entities=["Ann", "Paris"])
    proposal = Memory.propose(alice, "fact b", Memory.Type.SEMANTIC, entities=["ANN"])
    rejected = Memory.propose(alice, "fact c", Memory.Type.SEMANTIC, entities=["Rome"])
    edited = Memory.propose(alice, "fact d", Memory.Type.SEMANTIC, entities=["Nice"])
    assert assert_matches_rebuild() == {(alice.pk, "ann"): 1, (alice.pk, "paris"): 1}

    proposal.confirm()
    proposal.reconfirm()
    rejected.reject()
    assert assert_matches_rebuild() == {(alice.pk, "ann"): 2, (alice.pk, "paris"): 1}

    second = first.supersede("a2", entities=["Ann", "Lisbon"])
    edited.supersede("d2", entities=["Nice", "Cannes"])
    assert assert_matches_rebuild() == {
        (alice.pk, "ann"): 2,
        (alice.pk, "lisbon"): 1,
        (alice.pk, "nice"): 1,
        (alice.pk, "cannes"): 1,
    }

    proposal.archive()
    Memory.merge([second, edited.superseded_by], "merged")
    assert assert_matches_rebuild() == {
        (alice.pk, "ann"): 1,
        (alice.pk, "lisbon"): 1,
        (alice.pk, "nice"): 1,
        (alice.pk, "cannes"): 1,
    }


def test_it_applies_a_multi_row_status_change_at_once(alice, bob):
    for i in range(30):
        make_memory(alice if i % 2 else bob, f"m{i}", entities=["Tea", f"T{i % 4}"])

    Memory.objects.filter(owner=alice, content__in=["m1", "m3", "m5", "m7"]).update(
        status=Memory.Status.ARCHIVED
    )

    kept = assert_matches_rebuild()
    assert kept[(alice.pk, "tea")] == 11
    assert kept[(bob.pk, "tea")] == 15


def test_it_leaves_the_dictionary_alone_on_updates_of_other_columns(alice):
    for i in range(5):
        make_memory(alice, f"m{i}", entities=["Tea", f"T{i}"])
    before_counts, before_rows = counted(), row_versions()

    Memory.objects.filter(owner=alice).update(confidence=0.3)
    # Naming a column in SET without changing it is not a change either.
    Memory.objects.filter(owner=alice).update(status=Memory.Status.ACTIVE)

    assert counted() == before_counts
    assert row_versions() == before_rows  # not even rewritten with the same count


def test_it_moves_counts_when_refs_or_owner_change_in_place(alice, bob):
    memory = make_memory(alice, "a", entities=["Ann", "Paris"])
    make_memory(alice, "b", entities=["Paris"])

    with rewrites_allowed() as cursor:
        cursor.execute(
            "UPDATE memories_memory SET entity_refs = %s WHERE id = %s",
            [["ann", "Lisbon", "LISBON"], memory.pk],
        )
        assert counted() == {
            (alice.pk, "ann"): 1,
            (alice.pk, "paris"): 1,
            (alice.pk, "lisbon"): 1,
        }
        cursor.execute(
            "UPDATE memories_memory SET owner_id = %s WHERE id = %s", [bob.pk, memory.pk]
        )

    assert assert_matches_rebuild() == {
        (alice.pk, "paris"): 1,
        (bob.pk, "ann"): 1,
        (bob.pk, "lisbon"): 1,
    }


def test_it_keeps_a_key_at_zero_when_its_last_memory_goes(alice):
    only = Memory.remember(alice, "fact a", Memory.Type.SEMANTIC, entities=["Oslo"])

    only.archive()

    assert OwnerEntity.objects.get(owner=alice, key="oslo").memories == 0
    assert assert_matches_rebuild() == {}
    assert not OwnerEntity.objects.filter(owner=alice, key="oslo").exists()


def test_it_never_counts_below_zero_for_a_key_missing_from_the_dictionary(alice):
    memory = Memory.remember(alice, "fact a", Memory.Type.SEMANTIC, entities=["Oslo", "Bergen"])
    OwnerEntity.objects.filter(owner=alice, key="oslo").delete()

    memory.archive()

    assert dict(OwnerEntity.objects.filter(owner=alice).values_list("key", "memories")) == {
        "bergen": 0
    }
