"""Per-owner BM25 corpus counters (retrieval 0006): N and the total length.

After every kind of write the trigger-kept counters must equal a count of the
owner's active memories, and what ``index.rebuild()`` builds.
"""

from __future__ import annotations

import pytest
from django.db import connection

from memories.models import Memory
from retrieval import index
from retrieval.models import OwnerCorpusChange
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def counted() -> dict[int, tuple[int, int]]:
    """(N, Σ length) per owner, straight from the active memories."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT owner_id, count(*), sum(length(tsv)) FROM memories_memory "
            "WHERE status = 'active' GROUP BY owner_id"
        )
        return {owner: (documents, total) for owner, documents, total in cursor.fetchall()}


def kept() -> dict[int, tuple[int, int]]:
    """The sums of the recorded changes, leaving out owners with nothing active."""
    sums: dict[int, tuple[int, int]] = {}
    rows = OwnerCorpusChange.objects.values_list("owner_id", "documents", "total_length")
    for owner, documents, total in rows:
        before = sums.get(owner, (0, 0))
        sums[owner] = (before[0] + documents, before[1] + total)
    return {owner: sums[owner] for owner in sums if sums[owner][0]}


def assert_counts_right() -> dict[int, tuple[int, int]]:
    counters = kept()
    assert counters == counted()
    index.rebuild()
    assert kept() == counters
    return counters


def test_it_counts_active_memories_only(alice):
    make_memory(alice, "Coffee, coffee and more coffee in Lisbon")
    make_memory(alice, "Tea in Porto", status=Memory.Status.PROPOSED)
    make_memory(alice, "Tea in Rome", status=Memory.Status.ARCHIVED)
    # "Coffee, coffee and more coffee in Lisbon": two distinct lexemes.
    assert assert_counts_right() == {alice.pk: (1, 2)}


def test_it_counts_a_multi_row_insert_per_owner(alice, bob):
    statuses = [Memory.Status.ACTIVE, Memory.Status.PROPOSED, Memory.Status.ARCHIVED]
    Memory.objects.bulk_create(
        Memory(
            owner=alice if i % 3 else bob,
            type=Memory.Type.SEMANTIC,
            content=f"word{i % 5} and some shared words number {i}",
            status=statuses[i % 4 % 3],
        )
        for i in range(200)
    )
    counters = assert_counts_right()
    assert set(counters) == {alice.pk, bob.pk}


def test_it_follows_every_state_change(alice, bob):
    make_memory(bob, "Bob's own memory stays counted for Bob")
    first = Memory.remember(alice, "Aisle seats please", Memory.Type.PREFERENCE)
    proposal = Memory.propose(alice, "Ann likes espresso", Memory.Type.SEMANTIC)
    rejected = Memory.propose(alice, "Rome in May", Memory.Type.SEMANTIC)
    assert assert_counts_right()[alice.pk][0] == 1

    proposal.confirm()
    rejected.reject()
    proposal.reconfirm()
    assert assert_counts_right()[alice.pk][0] == 2

    second = first.supersede("Window seats now, and only window seats")
    assert assert_counts_right()[alice.pk][0] == 2
    merged = Memory.merge([second, proposal], "Window seats in Lisbon")
    assert assert_counts_right()[alice.pk][0] == 1
    merged.archive()
    counters = assert_counts_right()
    assert alice.pk not in counters and counters[bob.pk][0] == 1


def test_it_applies_a_multi_row_status_change_at_once(alice, bob):
    for i in range(30):
        make_memory(alice if i % 2 else bob, f"tea number{i}")
    Memory.objects.filter(owner=alice, content__in=["tea number1", "tea number3"]).update(
        status=Memory.Status.ARCHIVED
    )
    counters = assert_counts_right()
    assert counters[alice.pk][0] == 13 and counters[bob.pk][0] == 15


def test_updates_of_other_columns_record_nothing(alice):
    for i in range(5):
        make_memory(alice, f"tea number{i}")
    before = OwnerCorpusChange.objects.count()
    Memory.objects.filter(owner=alice).update(confidence=0.3)
    assert OwnerCorpusChange.objects.count() == before


def test_compacting_folds_each_owner_into_one_row(alice, bob):
    for i in range(6):
        make_memory(alice if i % 2 else bob, f"coffee number{i}")
    Memory.objects.filter(owner=alice).update(status=Memory.Status.ARCHIVED)
    make_memory(bob, "One more for Bob")
    before = kept()
    assert OwnerCorpusChange.objects.count() > 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT timothy_compact_owner_corpus()")
    # Alice has nothing active left: her rows fold into nothing.
    assert OwnerCorpusChange.objects.count() == 1
    assert kept() == before == counted()
