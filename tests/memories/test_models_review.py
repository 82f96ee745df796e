"""Confirm as a new version of an active memory, edit-then-confirm, restore."""

from __future__ import annotations

import pytest

from memories.models import IllegalTransition, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db

Status = Memory.Status
Action = MemoryEvent.Action


def test_it_confirms_a_proposal_as_the_new_version_of_an_active_memory(alice):
    aisle = make_memory(alice, "Prefers an aisle seat.", status=Status.ACTIVE)
    window = Memory.propose(alice, "Prefers a window seat.", Memory.Type.PREFERENCE)

    window.confirm(actor=alice, via="page", reason="changed her mind", replaces=aisle)

    aisle.refresh_from_db()
    window.refresh_from_db()
    assert window.status == Status.ACTIVE and window.last_confirmed_at is not None
    assert aisle.status == Status.SUPERSEDED and aisle.superseded_by_id == window.pk
    assert [m.pk for m in Memory.objects.chain(aisle)] == [aisle.pk, window.pk]
    assert aisle.head_id() == window.pk
    confirmed = window.events.get(action=Action.CONFIRMED)
    assert confirmed.data == {"from": "proposed", "replaces": aisle.pk}
    assert (confirmed.actor, confirmed.via, confirmed.reason) == (alice, "page", "changed her mind")
    superseded = aisle.events.get(action=Action.SUPERSEDED)
    assert superseded.data == {"from": "active", "successor": window.pk}


def test_it_refuses_to_replace_a_memory_that_is_no_longer_active(alice):
    old = make_memory(alice, "Lives in Lisbon.", status=Status.ACTIVE)
    head = old.supersede("Lives in Porto.")
    proposal = Memory.propose(alice, "Lives in Berlin.", Memory.Type.SEMANTIC)
    events_before = MemoryEvent.objects.count()

    with pytest.raises(IllegalTransition) as raised:
        proposal.confirm(replaces=old)

    assert raised.value.head_id == head.pk
    assert "Cannot replace memory" in str(raised.value)
    proposal.refresh_from_db()
    assert proposal.status == Status.PROPOSED
    assert MemoryEvent.objects.count() == events_before


def test_it_refuses_to_confirm_twice_as_a_new_version(alice):
    old = make_memory(alice, "Lives in Lisbon.", status=Status.ACTIVE)
    other = make_memory(alice, "Lives in Lisbon, Portugal.", status=Status.ACTIVE)
    proposal = Memory.propose(alice, "Lives in Berlin.", Memory.Type.SEMANTIC)
    proposal.confirm(replaces=old)

    with pytest.raises(IllegalTransition, match="it is active"):
        proposal.confirm(replaces=other)
    other.refresh_from_db()
    assert other.status == Status.ACTIVE


def test_it_refuses_to_replace_another_owners_memory(alice, bob):
    bobs = make_memory(bob, "Bob lives in Leeds.", status=Status.ACTIVE)
    proposal = Memory.propose(alice, "Lives in Berlin.", Memory.Type.SEMANTIC)

    with pytest.raises(ValueError, match="same owner"):
        proposal.confirm(replaces=bobs)
    bobs.refresh_from_db()
    assert bobs.status == Status.ACTIVE


def test_it_gives_the_owners_edit_the_owners_confidence_and_source(alice):
    proposal = Memory.propose(
        alice,
        "Prefers aisle seats.",
        Memory.Type.PREFERENCE,
        confidence=0.55,
        source=Memory.Source.EXTRACTION,
    )

    new = proposal.edit(
        "Prefers window seats.", entities=["flights"], by_owner=True, actor=alice, via="page"
    )

    proposal.refresh_from_db()
    assert proposal.status == Status.SUPERSEDED and proposal.superseded_by_id == new.pk
    assert (new.status, new.confidence, new.source) == (Status.ACTIVE, 1.0, "page")
    assert new.entity_refs == ["flights"]
    assert [e.action for e in new.events.order_by("id")] == [Action.VERSION, Action.CONFIRMED]
    assert new.events.get(action=Action.CONFIRMED).data == {
        "from": "proposed",
        "edited": proposal.pk,
        "proposed_confidence": 0.55,
        "proposed_source": "extraction",
    }


def test_it_edits_then_confirms_only_a_proposal_that_is_still_one(alice):
    proposal = make_memory(alice, status=Status.PROPOSED)
    Memory.objects.get(pk=proposal.pk).reject()
    with pytest.raises(IllegalTransition, match="Cannot confirm"):
        proposal.edit("Something else.", by_owner=True)


def test_it_restores_a_rejected_memory_to_the_queue(alice):
    memory = Memory.propose(alice, "Has a cat.", Memory.Type.SEMANTIC)
    memory.reject(actor=alice, reason="no cat")

    memory.restore(actor=alice, via="page", reason="misclick")

    memory.refresh_from_db()
    assert memory.status == Status.PROPOSED
    assert list(Memory.objects.for_owner(alice).pending()) == [memory]
    assert [e.action for e in memory.events.order_by("id")] == [
        Action.PROPOSED,
        Action.REJECTED,
        Action.RESTORED,
    ]
    memory.confirm()
    memory.refresh_from_db()
    assert memory.status == Status.ACTIVE
