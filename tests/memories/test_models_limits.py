"""The memory rules' limits hold on the model, whichever method writes."""

from __future__ import annotations

import pytest

from memories.models import (
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_REASON_CHARS,
    MAX_SEARCH_CHARS,
    InvalidMemory,
    Memory,
    MemoryEvent,
    TooLong,
    fit_entities,
)
from tests.base import make_memory

pytestmark = pytest.mark.django_db

TOO_MANY = [f"name {n}" for n in range(MAX_ENTITIES + 1)]
TOO_LONG_NAME = "x" * (MAX_ENTITY_CHARS + 1)


@pytest.mark.parametrize("create", [Memory.remember, Memory.propose])
def test_it_refuses_content_over_the_setting(alice, settings, create):
    settings.MAX_CONTENT_CHARS = 20
    with pytest.raises(TooLong) as refused:
        create(alice, "x" * 21, "semantic")
    assert refused.value.field == "content"
    assert "At most 20 characters" in refused.value.message
    assert not Memory.objects.exists()


@pytest.mark.parametrize("create", [Memory.remember, Memory.propose])
def test_it_accepts_content_at_the_setting(alice, settings, create):
    settings.MAX_CONTENT_CHARS = 20
    assert create(alice, "x" * 20, "semantic").content == "x" * 20


@pytest.mark.parametrize("create", [Memory.remember, Memory.propose])
@pytest.mark.parametrize(
    "entities, message",
    [(TOO_MANY, f"At most {MAX_ENTITIES} entities"), ([TOO_LONG_NAME], "An entity is at most")],
)
def test_it_refuses_entities_over_the_limits(alice, create, entities, message):
    with pytest.raises(InvalidMemory) as refused:
        create(alice, "Likes tea.", "semantic", entities=entities)
    assert refused.value.field == "entities"
    assert message in refused.value.message
    assert not Memory.objects.exists()


def test_it_counts_entities_after_removing_repeats(alice):
    names = [f"Name {n}" for n in range(MAX_ENTITIES)]
    memory = Memory.remember(alice, "Likes tea.", "semantic", entities=names + ["name 0"])
    assert memory.entity_refs == names


def test_it_accepts_the_most_and_longest_entities(alice):
    names = [f"{n:03d}" + "x" * (MAX_ENTITY_CHARS - 3) for n in range(MAX_ENTITIES)]
    memory = Memory.propose(alice, "Likes tea.", "semantic", entities=names)
    assert memory.entity_refs == names


def test_it_refuses_a_reason_over_the_limit_on_create(alice):
    with pytest.raises(TooLong) as refused:
        Memory.remember(alice, "Likes tea.", "semantic", reason="r" * (MAX_REASON_CHARS + 1))
    assert refused.value.field == "reason"
    assert not Memory.objects.exists()


def test_it_keeps_a_reason_at_the_limit(alice):
    memory = Memory.remember(alice, "Likes tea.", "semantic", reason="r" * MAX_REASON_CHARS)
    assert memory.events.get().reason == "r" * MAX_REASON_CHARS


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"content": "y" * 21}, "content"),
        ({"content": "Likes coffee.", "entities": TOO_MANY}, "entities"),
        ({"content": "Likes coffee.", "entities": [TOO_LONG_NAME]}, "entities"),
        ({"content": "Likes coffee.", "reason": "r" * (MAX_REASON_CHARS + 1)}, "reason"),
    ],
)
def test_it_refuses_a_new_version_over_the_limits(alice, settings, fields, field):
    settings.MAX_CONTENT_CHARS = 20
    memory = make_memory(alice, "Likes tea.")
    content = fields.pop("content")
    with pytest.raises(InvalidMemory) as refused:
        memory.supersede(content, **fields)
    assert refused.value.field == field
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 1


def test_it_refuses_a_reason_over_the_limit_on_any_state_change(alice):
    memory = make_memory(alice, "Likes tea.", status=Memory.Status.PROPOSED)
    with pytest.raises(TooLong):
        memory.confirm(reason="r" * (MAX_REASON_CHARS + 1))
    memory.refresh_from_db()
    # The event could not be written, so neither was the change.
    assert memory.status == Memory.Status.PROPOSED
    assert not MemoryEvent.objects.exists()


def test_it_refuses_a_merge_reason_over_the_limit(alice):
    first, second = make_memory(alice, "Likes tea."), make_memory(alice, "Likes tea a lot.")
    with pytest.raises(TooLong):
        Memory.merge([first, second], "Likes tea.", reason="r" * (MAX_REASON_CHARS + 1))
    assert Memory.objects.count() == 2


def test_it_keeps_the_first_entities_of_a_merge_within_the_limit(alice):
    first = make_memory(alice, "Likes tea.", entities=[f"a{n}" for n in range(40)])
    second = make_memory(alice, "Likes tea a lot.", entities=[f"b{n}" for n in range(40)])
    merged = Memory.merge([first, second], "Likes tea.")
    assert len(merged.entity_refs) == MAX_ENTITIES
    assert merged.entity_refs[:40] == first.entity_refs
    # The members keep all of theirs in the chain.
    second.refresh_from_db()
    assert len(second.entity_refs) == 40


def test_it_fits_found_entities_to_the_limits():
    names = ["Tea", TOO_LONG_NAME, *[f"N{n}" for n in range(MAX_ENTITIES + 5)]]
    fitted = fit_entities(names)
    assert len(fitted) == MAX_ENTITIES
    assert TOO_LONG_NAME not in fitted
    assert fitted[0] == "Tea"


def test_it_refuses_a_search_over_the_limit(alice):
    with pytest.raises(TooLong) as refused:
        Memory.objects.for_owner(alice).matching("w" * (MAX_SEARCH_CHARS + 1))
    assert refused.value.field == "q"


def test_it_searches_at_the_limit(alice):
    make_memory(alice, "Likes tea.")
    text = "tea" + " " * (MAX_SEARCH_CHARS - 3)
    assert Memory.objects.for_owner(alice).matching(text).count() == 1
