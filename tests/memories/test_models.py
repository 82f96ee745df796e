"""State changes of a memory: every legal and illegal transition and the events they leave."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories import redaction
from memories.models import IllegalTransition, Memory, MemoryEvent, MemoryIsPermanent
from tests.base import make_memory

pytestmark = pytest.mark.django_db

Status = Memory.Status
Action = MemoryEvent.Action

# (method, statuses it is allowed from, status it leads to, event it leaves)
TRANSITIONS = [
    ("confirm", {Status.PROPOSED}, Status.ACTIVE, Action.CONFIRMED),
    ("reconfirm", {Status.ACTIVE}, Status.ACTIVE, Action.RECONFIRMED),
    ("reject", {Status.PROPOSED}, Status.REJECTED, Action.REJECTED),
    ("archive", {Status.ACTIVE}, Status.ARCHIVED, Action.ARCHIVED),
    ("restore", {Status.REJECTED}, Status.PROPOSED, Action.RESTORED),
]

LEGAL = [
    (method, start, to_status, event)
    for method, allowed, to_status, event in TRANSITIONS
    for start in sorted(allowed)
]
ILLEGAL = [
    (method, start)
    for method, allowed, _, _ in TRANSITIONS
    for start in Status.values
    if start not in allowed
]


def memory_in(owner, status: str) -> Memory:
    """A memory of ``owner`` in ``status``; a superseded one gets a real successor, a
    redacted one is redacted for real."""
    if status == Status.SUPERSEDED:
        old = make_memory(owner, "Alice lives in Lyon.", status=Status.ACTIVE)
        old.supersede("Alice lives in Paris.")
        return old
    if status == Status.REDACTED:
        memory = make_memory(owner, status=Status.ACTIVE)
        redaction.redact(memory, reason="private", actor=owner)
        return memory
    return make_memory(owner, status=status)


def events_of(memory: Memory) -> list[MemoryEvent]:
    return list(MemoryEvent.objects.filter(memory=memory).order_by("id"))


@pytest.mark.parametrize(("method", "start", "to_status", "event"), LEGAL)
def test_it_allows_each_legal_transition_and_logs_it(alice, method, start, to_status, event):
    memory = memory_in(alice, start)
    before = timezone.now()

    getattr(memory, method)(actor=alice, via="page", reason="looked right")

    memory.refresh_from_db()
    assert memory.status == to_status
    [logged] = events_of(memory)
    assert logged.action == event
    assert logged.actor == alice
    assert logged.owner == alice
    assert logged.via == "page"
    assert logged.reason == "looked right"
    assert logged.data == {"from": start}
    assert logged.at >= before


@pytest.mark.parametrize(("method", "start"), ILLEGAL)
def test_it_refuses_each_illegal_transition(alice, method, start):
    memory = memory_in(alice, start)
    events_before = MemoryEvent.objects.count()

    with pytest.raises(IllegalTransition) as raised:
        getattr(memory, method)(actor=alice)

    memory.refresh_from_db()
    assert memory.status == start
    assert MemoryEvent.objects.count() == events_before
    assert f"it is {start}" in str(raised.value)
    assert raised.value.status == start


@pytest.mark.parametrize(
    "method", ["confirm", "reject", "archive", "reconfirm", "supersede", "restore"]
)
def test_it_names_the_chain_head_when_refusing_a_superseded_memory(alice, method):
    first = make_memory(alice, "Alice drinks tea.", status=Status.ACTIVE)
    second = first.supersede("Alice drinks green tea.")
    head = second.supersede("Alice drinks green tea, no sugar.")

    with pytest.raises(IllegalTransition) as raised:
        getattr(first, method)()

    assert raised.value.head_id == head.pk
    assert "it is superseded" in str(raised.value)
    assert f"the head of its chain is memory {head.pk}" in str(raised.value)


def test_it_does_not_mention_a_head_for_other_states(alice):
    memory = make_memory(alice, status=Status.REJECTED)

    with pytest.raises(IllegalTransition) as raised:
        memory.confirm()

    assert raised.value.head_id is None
    assert "head" not in str(raised.value)


def test_it_proposes_a_staged_memory_with_an_event(alice):
    memory = Memory.propose(
        alice,
        "Alice is vegetarian.",
        Memory.Type.PREFERENCE,
        entities=["Alice", " alice ", "food"],
        confidence=0.7,
        source=Memory.Source.EXTRACTION,
        session_id="s-1",
        actor=alice,
        via="extraction",
        reason="said so",
    )

    memory.refresh_from_db()
    assert memory.status == Status.PROPOSED
    assert memory.last_confirmed_at is None
    assert memory.entity_refs == ["Alice", "food"]
    assert memory.confidence == 0.7
    assert memory.source == Memory.Source.EXTRACTION
    assert memory.session_id == "s-1"
    [logged] = events_of(memory)
    assert (logged.action, logged.actor, logged.via, logged.reason) == (
        Action.PROPOSED,
        alice,
        "extraction",
        "said so",
    )


def test_it_remembers_an_active_memory_at_full_confidence(alice):
    memory = Memory.remember(alice, "Alice's birthday is 3 May.", Memory.Type.SEMANTIC)

    memory.refresh_from_db()
    assert memory.status == Status.ACTIVE
    assert memory.confidence == 1.0
    assert memory.source == Memory.Source.REMEMBER
    assert memory.last_confirmed_at == memory.created_at
    assert [e.action for e in events_of(memory)] == [Action.CREATED]


def test_it_stamps_last_confirmed_at_on_confirm_and_reconfirm(alice):
    memory = Memory.propose(alice, "Alice runs on Sundays.", Memory.Type.EPISODIC)
    memory.confirm()
    confirmed_at = memory.last_confirmed_at
    assert confirmed_at is not None

    memory.reconfirm()

    memory.refresh_from_db()
    assert memory.last_confirmed_at > confirmed_at


def test_it_logs_the_locked_rows_status_not_a_stale_instances(alice):
    memory = make_memory(alice, status=Status.PROPOSED)
    stale = Memory.objects.get(pk=memory.pk)
    memory.confirm()

    stale.archive()

    assert events_of(memory)[-1].data == {"from": Status.ACTIVE}
    assert stale.status == Status.ARCHIVED


def test_it_supersedes_an_active_memory_with_a_new_head(alice):
    old = make_memory(alice, "Alice lives in Lyon.", entities=["Alice", "Lyon"], confidence=0.8)

    new = old.supersede(
        "Alice lives in Paris.", entities=["Alice", "Paris"], actor=alice, reason="moved"
    )

    old.refresh_from_db()
    new.refresh_from_db()
    assert old.status == Status.SUPERSEDED
    assert old.superseded_by_id == new.pk
    assert new.status == Status.ACTIVE
    assert new.superseded_by_id is None
    assert new.content == "Alice lives in Paris."
    assert new.entity_refs == ["Alice", "Paris"]
    assert new.confidence == 0.8
    assert new.type == old.type
    assert new.owner == alice
    assert new.last_confirmed_at == new.created_at
    [superseded] = events_of(old)
    assert superseded.action == Action.SUPERSEDED
    assert superseded.data == {"from": Status.ACTIVE, "successor": new.pk}
    assert (superseded.actor, superseded.reason) == (alice, "moved")
    [version] = events_of(new)
    assert version.action == Action.VERSION
    assert version.data == {"supersedes": [old.pk]}


def test_it_supersedes_a_proposal_as_edit_then_confirm(alice):
    proposal = Memory.propose(alice, "Alice likes jazz.", Memory.Type.PREFERENCE)

    edited = proposal.supersede("Alice likes bebop jazz.", type=Memory.Type.PREFERENCE)

    assert proposal.status == Status.SUPERSEDED
    assert edited.status == Status.ACTIVE
    assert edited.last_confirmed_at is not None
    assert [m.pk for m in Memory.objects.chain(edited)] == [proposal.pk, edited.pk]
    assert events_of(proposal)[-1].data["from"] == Status.PROPOSED


def test_it_changes_only_the_type_when_asked(alice):
    old = make_memory(alice, "Alice went to Rome in 2019.", type=Memory.Type.SEMANTIC)

    new = old.supersede(type=Memory.Type.EPISODIC)

    assert (new.content, new.type) == ("Alice went to Rome in 2019.", Memory.Type.EPISODIC)


def test_it_merges_several_memories_into_one_head(alice):
    now = timezone.now()
    a = make_memory(
        alice,
        "Alice owns a cat.",
        entities=["Alice", "cat"],
        confidence=0.6,
        last_confirmed_at=now - timedelta(days=30),
    )
    b = make_memory(
        alice,
        "Alice has a cat named Tom.",
        entities=["Tom", "CAT"],
        confidence=0.9,
        last_confirmed_at=now - timedelta(days=90),
    )
    c = make_memory(
        alice, "Alice's cat is Tom.", confidence=0.7, last_confirmed_at=now - timedelta(days=2)
    )

    merged = Memory.merge([c, a, b.pk], "Alice has a cat named Tom.", actor=alice, reason="dupes")

    merged.refresh_from_db()
    assert merged.status == Status.ACTIVE
    assert merged.entity_refs == ["Alice", "cat", "Tom"]
    assert merged.confidence == 0.9
    assert merged.last_confirmed_at == c.last_confirmed_at
    assert merged.source == Memory.Source.CONSOLIDATION
    for member in (a, b, c):
        member.refresh_from_db()
        assert member.status == Status.SUPERSEDED
        assert member.superseded_by_id == merged.pk
        assert events_of(member)[-1].data == {
            "from": Status.ACTIVE,
            "successor": merged.pk,
            "merge": True,
        }
    [logged] = events_of(merged)
    assert logged.action == Action.MERGED
    assert logged.data == {"supersedes": sorted([a.pk, b.pk, c.pk])}
    assert (logged.actor, logged.via, logged.reason) == (alice, "consolidation", "dupes")
    assert a.status == Status.SUPERSEDED  # the caller's instance is refreshed too


def test_it_refuses_to_merge_unless_every_member_is_active(alice):
    a = make_memory(alice, "Alice owns a cat.")
    b = make_memory(alice, "Alice owns a kitten.", status=Status.ARCHIVED)

    with pytest.raises(IllegalTransition, match="it is archived"):
        Memory.merge([a, b], "Alice owns a cat.")

    a.refresh_from_db()
    assert a.status == Status.ACTIVE
    assert Memory.objects.count() == 2


def test_it_refuses_to_merge_memories_of_two_owners(alice, bob):
    with pytest.raises(ValueError, match="one owner"):
        Memory.merge([make_memory(alice), make_memory(bob)], "Mixed.")

    assert Memory.objects.filter(status=Status.SUPERSEDED).count() == 0


def test_it_refuses_to_merge_a_single_memory(alice):
    with pytest.raises(ValueError, match="at least two"):
        Memory.merge([make_memory(alice)], "Alone.")


def test_it_returns_the_whole_chain_oldest_first_from_any_member(alice):
    a = make_memory(alice, "Alice owns a cat.")
    b = make_memory(alice, "Alice has a cat called Tom.")
    merged = Memory.merge([a, b], "Alice has a cat, Tom.")
    head = merged.supersede("Alice has a cat, Tom, aged 4.")
    unrelated = make_memory(alice, "Alice likes tea.")

    expected = [a.pk, b.pk, merged.pk, head.pk]
    for member in (a, b, merged, head):
        assert [m.pk for m in Memory.objects.chain(member)] == expected
        assert [m.pk for m in member.chain()] == expected
    assert [m.pk for m in Memory.objects.chain(a.pk)] == expected
    assert [m.pk for m in unrelated.chain()] == [unrelated.pk]
    assert a.head_id() == head.pk


def test_it_keeps_other_owners_out_of_an_owner_scoped_chain(alice, bob):
    memory = make_memory(alice)

    assert Memory.objects.for_owner(bob).chain(memory) == []
    assert Memory.objects.for_owner(alice).chain(memory) == [memory]


def test_it_filters_active_pending_heads_and_owner(alice, bob):
    active = make_memory(alice, status=Status.ACTIVE)
    older = make_memory(
        alice, status=Status.PROPOSED, created_at=timezone.now() - timedelta(days=1)
    )
    newer = make_memory(alice, status=Status.PROPOSED)
    make_memory(bob, status=Status.ACTIVE)
    head = active.supersede("Alice prefers window seats.")

    mine = Memory.objects.for_owner(alice)
    assert list(mine.active()) == [head]
    assert list(mine.pending()) == [older, newer]
    assert set(mine.heads()) == {head, older, newer}
    assert Memory.objects.active().count() == 2


def test_it_lowers_confidence_but_never_raises_it(alice):
    memory = make_memory(alice, confidence=0.8)

    memory.lower_confidence(0.5, reason="stale")
    memory.lower_confidence(0.9)

    memory.refresh_from_db()
    assert memory.confidence == 0.5
    first, second = events_of(memory)
    assert first.action == Action.DECAYED
    assert first.data == {"from_confidence": 0.8, "to_confidence": 0.5}
    assert first.reason == "stale"
    assert second.data == {"from_confidence": 0.5, "to_confidence": 0.5}


def test_it_lowers_confidence_of_active_memories_only(alice):
    memory = make_memory(alice, status=Status.PROPOSED)

    with pytest.raises(IllegalTransition, match="it is proposed"):
        memory.lower_confidence(0.1)


def test_it_refuses_to_delete_a_memory_or_an_event(alice):
    memory = Memory.remember(alice, "Alice is left-handed.", Memory.Type.SEMANTIC)

    with pytest.raises(MemoryIsPermanent):
        memory.delete()
    with pytest.raises(MemoryIsPermanent):
        Memory.objects.filter(pk=memory.pk).delete()
    with pytest.raises(MemoryIsPermanent):
        MemoryEvent.objects.filter(memory=memory).delete()
    with pytest.raises(MemoryIsPermanent):
        events_of(memory)[0].delete()
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert MemoryEvent.objects.filter(memory=memory).count() == 1


def test_it_refuses_to_rewrite_a_saved_event(alice):
    memory = Memory.remember(alice, "Alice is left-handed.", Memory.Type.SEMANTIC)
    event = events_of(memory)[0]
    event.reason = "rewritten"

    with pytest.raises(MemoryIsPermanent):
        event.save()
