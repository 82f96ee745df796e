"""An edit that changes nothing writes nothing (Memory.edit, the pages' and the API's)."""

from __future__ import annotations

import pytest

from memories.models import IllegalTransition, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def test_it_writes_nothing_for_an_unchanged_active_memory(alice):
    memory = make_memory(alice, "Likes tea.", entities=["tea"], confidence=0.8)
    head = memory.edit("Likes tea.", type="semantic", entities=["tea"], confidence=0.8)
    assert head.pk == memory.pk
    assert head.status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 1
    assert not MemoryEvent.objects.exists()


def test_it_counts_missing_values_as_unchanged(alice):
    memory = make_memory(alice, "Likes tea.", entities=["tea"])
    # No entities given with the same text: the version would keep the old ones.
    assert memory.edit("Likes tea.", entities=[]).pk == memory.pk
    assert Memory.objects.count() == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"content": "Likes green tea."},
        {"content": "Likes tea.", "type": "preference"},
        {"content": "Likes tea.", "entities": ["green tea"]},
        {"content": "Likes tea.", "confidence": 0.3},
    ],
)
def test_it_writes_a_version_when_something_changes(alice, fields):
    memory = make_memory(alice, "Likes tea.", entities=["tea"], confidence=0.8)
    content = fields.pop("content")
    head = memory.edit(content, **fields)
    assert head.pk != memory.pk
    memory.refresh_from_db()
    assert memory.superseded_by_id == head.pk


def test_it_confirms_an_unchanged_proposal_as_it_is(alice):
    memory = make_memory(alice, "Likes tea.", status=Memory.Status.PROPOSED)
    head = memory.edit("Likes tea.", via="api")
    assert head.pk == memory.pk
    assert head.status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 1
    assert list(memory.events.values_list("action", flat=True)) == ["confirmed"]


def test_it_confirms_an_unchanged_proposal_edited_then_confirmed(alice):
    memory = make_memory(alice, "Likes tea.", status=Memory.Status.PROPOSED)
    head = memory.edit("Likes tea.", type="semantic", entities=[], by_owner=True, via="page")
    assert head.pk == memory.pk
    assert head.status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 1


def test_it_refuses_to_edit_a_superseded_memory(alice):
    memory = make_memory(alice, "Likes tea.")
    memory.supersede("Likes green tea.")
    with pytest.raises(IllegalTransition):
        memory.edit("Likes tea.")
