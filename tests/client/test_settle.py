"""Settling an update from the assistant's side: what a new memory repeats or updates
comes back in words a model acts on, and a proposal is confirmed as the new version
of the memory it updates (409 once that memory is no longer the head)."""

from __future__ import annotations

import json
import uuid

import pytest

from timothy_client import IllegalTransition, InvalidRequest, MemoryRecord

AISLE = "Prefers an aisle seat on long flights."
WINDOW = "Prefers a window seat on long flights."
NO_WORD = "Content must say something: at least one word (two letters or digits in a row)."


def test_a_remembered_duplicate_says_what_it_repeats(fresh_memory):
    first = fresh_memory.remember("His wife's name is Leila.", "semantic")
    again = fresh_memory.remember("His wife's name is Leila", "semantic")
    [related] = again.related
    assert (related.id, related.relation, related.content) == (
        first.id,
        "duplicate",
        "His wife's name is Leila.",
    )
    assert 0 < related.score <= 1
    [note] = again.notes
    assert note == (
        f'This repeats #{first.id}: "His wife\'s name is Leila." — it was saved as that '
        "memory's new version, so one copy is kept."
    )


def test_a_proposal_that_repeats_says_how_to_settle_it(fresh_memory):
    aisle = fresh_memory.remember(AISLE, "preference")
    again = fresh_memory.propose(AISLE.lower(), "preference")
    [related] = again.related
    assert (related.id, related.relation, related.content) == (aisle.id, "duplicate", AISLE)
    assert again.notes == [
        f'This repeats #{aisle.id}: "{AISLE}" — nothing new to confirm: reject #{again.id}, '
        f"or confirm it with replaces={aisle.id} to keep the new wording."
    ]


def test_it_confirms_a_proposal_as_the_new_version(fresh_memory):
    aisle = fresh_memory.remember(AISLE, "preference")
    window = fresh_memory.propose(WINDOW, "preference")
    confirmed = fresh_memory.confirm(window.id, replaces=aisle.id, reason="changed her mind")
    assert (confirmed.id, confirmed.status) == (window.id, "active")
    chain = fresh_memory.chain(aisle.id)
    assert chain.head_id == window.id
    assert [version.id for version in chain.versions] == [aisle.id, window.id]
    assert [r.id for r in fresh_memory.list()] == [window.id]

    # The replaced memory is no longer the head: the same 409 as the API's, naming the head.
    middle = fresh_memory.propose("Prefers the middle seat on long flights.", "preference")
    with pytest.raises(IllegalTransition) as raised:
        fresh_memory.confirm(middle.id, replaces=aisle.id)
    assert raised.value.status == 409
    assert raised.value.head_id == window.id
    assert f"Cannot replace memory {aisle.id}: it is superseded" in raised.value.message
    assert [r.id for r in fresh_memory.list(status="proposed")] == [middle.id]


def test_the_remember_tool_result_carries_the_notes(fresh_memory):
    aisle = fresh_memory.remember(AISLE, "preference")
    result = fresh_memory.handle_tool_call(
        "remember", {"content": AISLE, "type": "preference"}, call_id=uuid.uuid4().hex
    )
    assert result.ok
    content = json.loads(result.content)
    assert content["related"] == [{"id": aisle.id, "relation": "duplicate", "content": AISLE}]
    assert content["notes"] == result.memory.notes
    assert content["notes"][0].startswith(f'This repeats #{aisle.id}: "{AISLE}" — it was saved')


def test_a_tool_result_without_related_memories_stays_short(fresh_memory):
    result = fresh_memory.handle_tool_call(
        "remember", {"content": "Keeps bees in the garden.", "type": "semantic"}
    )
    assert result.ok
    assert set(json.loads(result.content)) == {"saved", "id", "type", "content"}


def test_it_refuses_a_memory_with_no_word(fresh_memory):
    with pytest.raises(InvalidRequest) as raised:
        fresh_memory.remember("x", "semantic")
    assert raised.value.message == f"content: {NO_WORD}"
    result = fresh_memory.handle_tool_call("remember", {"content": "?", "type": "semantic"})
    assert not result.ok
    assert result.error == f"The memory service refused it: content: {NO_WORD}"
    assert list(fresh_memory.list(status="all")) == []


def record_with(*related: dict, status: str = "proposed") -> MemoryRecord:
    return MemoryRecord.from_json(
        {"id": 9, "type": "semantic", "content": "Cycles to work.", "status": status}
        | {"related": list(related)}
    )


def test_an_update_says_how_to_make_the_proposal_the_new_version():
    related = {"id": 3, "relation": "update", "score": 0.67, "content": AISLE}
    assert record_with(related).notes == [
        f'This may update #3: "{AISLE}" — if the user agrees it replaces it, confirm #9 '
        "with replaces=3 to make it the new version (a plain confirm keeps both active)."
    ]
    assert record_with(related, status="active").notes == [
        f'This may update #3: "{AISLE}" — both are active now: if the new fact replaces it, '
        "archive #3 (ask the user if unsure)."
    ]


def test_a_see_also_is_only_mentioned():
    record = record_with(
        {"id": 4, "relation": "see_also", "score": 0.4, "content": "Lives in Utrecht."}
    )
    assert record.notes == ['See also #4: "Lives in Utrecht."']
    assert "replaces" not in record.notes[0]


def test_an_unknown_relation_is_named_not_acted_on():
    record = record_with({"id": 5, "relation": "contradicts", "score": 0.7}, status="active")
    assert record.related[0].content == ""
    assert record.notes == ["Related to #5 (contradicts)"]


def test_an_answer_without_related_has_none():
    record = MemoryRecord.from_json(
        {"id": 9, "type": "semantic", "content": "Cycles to work.", "status": "active"}
    )
    assert (record.related, record.notes) == ([], [])


def test_one_decision_settles_a_proposals_copies(fresh_memory):
    first = fresh_memory.propose(AISLE, "preference")
    again = fresh_memory.propose(AISLE.lower(), "preference")
    copies = [item.id for item in again.related if item.status == "proposed"]
    assert copies == [first.id]

    confirmed = fresh_memory.confirm(again.id, copies=copies)

    assert confirmed.status == "active"
    assert confirmed.raw["settled_copies"] == [first.id]
    assert [r.id for r in fresh_memory.list(status="proposed")] == []
    assert [r.id for r in fresh_memory.list(status="rejected")] == [first.id]


def test_a_proposal_that_repeats_another_proposal_says_to_settle_both_at_once(fresh_memory):
    first = fresh_memory.propose(WINDOW, "preference")
    again = fresh_memory.propose(WINDOW.lower(), "preference")
    [related] = again.related
    assert (related.id, related.status) == (first.id, "proposed")
    # Not "confirm with replaces": a proposal cannot be replaced, that would be a 409.
    assert again.notes == [
        f'This repeats #{first.id}: "{WINDOW}", which also waits for the user — one decision '
        f"settles both: confirm (or reject) #{again.id} with copies=[{first.id}]."
    ]
