"""recall() loads the memories its legs named and checks each again: owner, status.

The legs filter by owner and status in their own queries, but a leg can be
wrong and a memory can change between the leg's query and the load. A leg here
is replaced through ``retrieval.legs.LEG_FUNCTIONS`` (the runner looks it up on
every call); the database is the real one."""

from __future__ import annotations

import pytest
from django.db import connection

from memories.models import Memory
from retrieval import legs
from retrieval.legs import vector_leg
from retrieval.recall import recall
from tests.base import make_memory
from tests.retrieval.helpers import axis, vector
from tests.retrieval.test_legs import request_for


def recalled_ids(owner, query: str) -> set[int]:
    """Every memory the recall came back with, packed or cut."""
    result = recall(owner, query, legs=["text"], explain=True, dry_run=True)
    return {item.memory.pk for item in [*result.memories, *result.cut]}


@pytest.mark.django_db
def test_it_drops_another_owners_memory_a_leg_returns(alice, bob, monkeypatch):
    mine = make_memory(alice, "Alice drinks green tea.")
    theirs = make_memory(bob, "Bob drinks green tea.")
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", lambda cursor, request: [theirs.pk, mine.pk])

    assert recalled_ids(alice, "green tea") == {mine.pk}


def change(memory: Memory, status: str) -> None:
    """Move an active memory to ``status`` the way the service does."""
    if status == Memory.Status.SUPERSEDED:
        memory.supersede("Alice drinks oolong.", actor=memory.owner)
    else:
        memory.archive(actor=memory.owner)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "status",
    [
        Memory.Status.PROPOSED,
        Memory.Status.REJECTED,
        Memory.Status.SUPERSEDED,
        Memory.Status.ARCHIVED,
    ],
)
def test_it_drops_a_memory_that_is_not_active_a_leg_returns(alice, monkeypatch, status):
    active = make_memory(alice, "Alice drinks green tea.")
    if status == Memory.Status.SUPERSEDED:
        other = make_memory(alice, "Alice drank black tea.")
        change(other, status)
    else:
        other = make_memory(alice, "Alice drank black tea.", status=status)
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", lambda cursor, request: [other.pk, active.pk])

    assert recalled_ids(alice, "tea") == {active.pk}


@pytest.mark.django_db
@pytest.mark.parametrize("status", [Memory.Status.ARCHIVED, Memory.Status.SUPERSEDED])
def test_it_drops_a_memory_whose_status_changed_after_the_leg_found_it(alice, monkeypatch, status):
    kept = make_memory(alice, "Alice drinks green tea.")
    changing = make_memory(alice, "Alice drinks black tea.")
    real_text_leg = legs.LEG_FUNCTIONS["text"]

    def text_leg_then_a_change(cursor, request):
        found = real_text_leg(cursor, request)
        assert {memory_id for memory_id, _ in found} == {kept.pk, changing.pk}
        # What another request could do between the leg's query and recall's load.
        change(changing, status)
        return found

    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", text_leg_then_a_change)

    assert recalled_ids(alice, "tea") == {kept.pk}


@pytest.mark.django_db
@pytest.mark.parametrize("through_the_index", [False, True])
def test_it_leaves_proposed_memories_out_of_the_vector_leg(alice, monkeypatch, through_the_index):
    proposed = make_memory(alice, "nearest", status=Memory.Status.PROPOSED, embedding=axis(0))
    active = make_memory(alice, "further", embedding=vector((0, 1.0), (1, 0.5)))
    if through_the_index:
        monkeypatch.setattr(legs, "VECTOR_EXACT_SCAN_MAX_ROWS", 0)
        monkeypatch.setattr(legs, "HNSW_MIN_OWNER_SHARE", 0.0)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memories_memory")
            assert legs._owner_dominates(cursor, alice.pk)
    request = request_for(alice, query_embedding=tuple(axis(0)), limit=1)

    with connection.cursor() as cursor:
        assert [memory_id for memory_id, _ in vector_leg(cursor, request)] == [active.pk]
    assert proposed.pk not in recalled_ids(alice, "nearest further")
