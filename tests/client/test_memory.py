"""The calls a caller makes on purpose, against a real running service: typed results
on success, typed errors on refusal."""

from __future__ import annotations

import uuid

import pytest

from timothy_client import (
    IllegalTransition,
    InvalidRequest,
    Memory,
    MemoryRecord,
    NotFound,
    Unauthorized,
)


def unique(text: str) -> str:
    return f"{text} ({uuid.uuid4().hex[:8]})"


def test_it_remembers_an_active_memory(memory):
    content = unique("Prefers an aisle seat on long-haul flights.")
    record = memory.remember(content, "preference", entities=["long-haul flights"])
    assert isinstance(record, MemoryRecord)
    assert (record.content, record.type, record.status) == (content, "preference", "active")
    assert (record.source, record.confidence) == ("remember", 1.0)
    assert record.entities == ["long-haul flights"]
    assert record.created_at is not None and record.created_at.tzinfo is not None


def test_it_proposes_then_confirms(memory):
    proposed = memory.propose(
        unique("Is training for the Berlin marathon."), "episodic", confidence=0.7
    )
    assert (proposed.status, proposed.confidence) == ("proposed", 0.7)
    confirmed = memory.confirm(proposed.id, reason="she said so")
    assert (confirmed.id, confirmed.status) == (proposed.id, "active")
    assert confirmed.last_confirmed_at is not None


def test_it_rejects_a_proposal(memory):
    proposed = memory.propose(unique("Dislikes jazz."), "preference")
    assert memory.reject(proposed.id, reason="wrong").status == "rejected"


def test_it_supersedes_and_follows_the_chain(memory):
    first = memory.remember(unique("Lives in Hamburg."), "semantic")
    second = memory.supersede(first.id, "Lives in Berlin.", entities=["Berlin"], reason="moved")
    assert second.id != first.id and second.status == "active"
    chain = memory.chain(first.id)
    assert chain.head_id == second.id
    assert [version.id for version in chain.versions] == [first.id, second.id]
    assert chain.head.content == "Lives in Berlin."
    old = chain.versions[0]
    assert (old.status, old.superseded_by) == ("superseded", second.id)
    superseded = [event for event in old.events if event.action == "superseded"]
    assert superseded and superseded[0].reason == "moved"
    assert superseded[0].actor == "owner"


def test_it_reconfirms_and_archives(memory):
    record = memory.remember(unique("Drinks oat milk."), "preference")
    assert memory.reconfirm(record.id).status == "active"
    assert memory.archive(record.id, reason="no longer true").status == "archived"


def test_it_raises_illegal_transition_with_the_head(memory):
    first = memory.remember(unique("Works at Acme."), "semantic")
    head = memory.supersede(first.id, "Works at Initech.")
    with pytest.raises(IllegalTransition) as raised:
        memory.archive(first.id)
    assert raised.value.status == 409
    assert raised.value.current_status == "superseded"
    assert raised.value.head_id == head.id
    assert f"memory {head.id}" in raised.value.message


def test_it_raises_not_found_for_an_unknown_id(memory):
    with pytest.raises(NotFound) as raised:
        memory.chain(10**12)
    assert raised.value.code == "not_found"


def test_it_raises_invalid_request_with_field_details(memory):
    with pytest.raises(InvalidRequest) as raised:
        memory.remember("   ", "semantic")
    assert "content" in raised.value.details
    with pytest.raises(InvalidRequest):
        memory.remember("Something.", "gossip")


def test_it_raises_unauthorized_for_a_wrong_token(timothy):
    with Memory(timothy.public_url, "tm_" + "x" * 43) as stranger, pytest.raises(Unauthorized):
        stranger.remember("Anything.", "semantic")


def test_it_lists_every_page(memory):
    session = "list-" + uuid.uuid4().hex
    created = [
        memory.remember(f"Fact number {n} of a long list.", "semantic", session_id=session).id
        for n in range(7)
    ]
    listed = [record.id for record in memory.list(session_id=session, page_size=3)]
    # Newest first, across three pages, none repeated or missed.
    assert listed == list(reversed(created))


def test_it_lists_by_status(memory):
    session = "status-" + uuid.uuid4().hex
    pending = memory.propose("Maybe likes tea.", "preference", session_id=session)
    memory.remember("Certainly likes coffee.", "preference", session_id=session)
    assert [r.id for r in memory.list(status="proposed", session_id=session)] == [pending.id]
    assert len(list(memory.list(status="all", session_id=session))) == 2


def test_it_sees_only_its_owners_memories(memory, fresh_memory):
    secret = memory.remember(unique("Has a secret garden."), "semantic")
    with pytest.raises(NotFound):
        fresh_memory.chain(secret.id)
    with pytest.raises(NotFound):
        fresh_memory.confirm(secret.id)
    assert list(fresh_memory.list(status="all")) == []
