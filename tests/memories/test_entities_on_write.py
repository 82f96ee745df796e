"""Every way a memory is written finds its entities when none are given."""

import json

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from memories import io
from memories.models import Memory
from retrieval.models import OwnerEntity
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def test_it_finds_entities_for_a_remembered_memory(alice):
    memory = Memory.remember(alice, "My sister Ana lives in Lisbon.", Memory.Type.SEMANTIC)
    assert memory.entity_refs == ["Ana", "Lisbon"]
    assert OwnerEntity.objects.get(owner=alice, key="ana").memories == 1


def test_it_keeps_the_entities_a_caller_gives(alice):
    memory = Memory.propose(
        alice, "My sister Ana lives in Lisbon.", Memory.Type.SEMANTIC, entities=["Ana Silva"]
    )
    assert memory.entity_refs == ["Ana Silva"]


def test_it_finds_names_the_owner_already_uses_whatever_their_case(alice, bob):
    Memory.remember(alice, "Dr. Okafor is my GP.", Memory.Type.SEMANTIC, entities=["Dr. Okafor"])
    Memory.remember(bob, "Works with Zed.", Memory.Type.SEMANTIC)
    memory = Memory.remember(alice, "booked dr. okafor for zed's check-up", Memory.Type.EPISODIC)
    # Alice's known name is found; Bob's "Zed" is Bob's, and lower-case here.
    assert memory.entity_refs == ["dr. okafor"]


def test_a_new_version_finds_what_its_new_text_names(alice):
    old = Memory.remember(alice, "Ana lives in Lisbon.", Memory.Type.SEMANTIC)
    same = old.supersede(type=Memory.Type.PREFERENCE)
    assert same.entity_refs == ["Ana", "Lisbon"]
    moved = same.supersede("Ana moved to Porto.")
    assert moved.entity_refs == ["Ana", "Porto"]
    given = moved.supersede("Ana moved to Porto in May.", entities=["Ana Silva"])
    assert given.entity_refs == ["Ana Silva"]


def test_an_import_finds_entities_for_lines_without(alice, tmp_path):
    path = tmp_path / "memories.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {"content": "Coffee with Morag in Glasgow.", "type": "episodic"},
                {"content": "morag's birthday is in May.", "type": "semantic"},
                {"content": "Likes tea.", "type": "preference", "entities": ["Tea Club"]},
            ]
        )
    )
    call_command("import_memories", str(path), owner=alice.username)
    found = dict(Memory.objects.filter(owner=alice).values_list("content", "entity_refs"))
    assert found["Coffee with Morag in Glasgow."] == ["Morag", "Glasgow"]
    # Learnt from the line before: names are found whatever their case.
    assert found["morag's birthday is in May."] == ["morag"]
    assert found["Likes tea."] == ["Tea Club"]


def test_the_backfill_fills_memories_written_without_entities(alice, bob):
    old = make_memory(alice, "Sailing with Ann near Oban.")  # as written before: no entities
    kept = make_memory(alice, "Chess with Ben.", entities=["Benjamin"])
    bobs = make_memory(bob, "Met Cleo in Paris.")
    call_command("find_entities", owner=alice.username)
    old.refresh_from_db()
    kept.refresh_from_db()
    bobs.refresh_from_db()
    assert old.entity_refs == ["Ann", "Oban"]
    assert kept.entity_refs == ["Benjamin"]
    assert bobs.entity_refs == []
    assert OwnerEntity.objects.get(owner=alice, key="oban").memories == 1
    call_command("find_entities")
    bobs.refresh_from_db()
    assert bobs.entity_refs == ["Cleo", "Paris"]


def test_the_database_lets_entities_be_filled_once_and_never_changed(alice):
    memory = make_memory(alice, "Sailing with Ann.")
    Memory.objects.filter(pk=memory.pk).update(entity_refs=["Ann"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.filter(pk=memory.pk).update(entity_refs=["Anne"])
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE memories_memory SET entity_refs = '{}' WHERE id = %s", [memory.pk])


def test_a_dry_run_writes_nothing(alice, capsys):
    memory = make_memory(alice, "Sailing with Ann.")
    call_command("find_entities", dry_run=True)
    memory.refresh_from_db()
    assert memory.entity_refs == []
    assert "Would give 1 of 1" in capsys.readouterr().out


def test_io_module_keeps_its_finder_to_the_owner(alice, bob):
    make_memory(bob, "Met Zed.", entities=["Zed"])
    result = io.import_memories(['{"content": "zed and me", "type": "semantic"}'], alice)
    assert result.imported == 1
    assert Memory.objects.get(owner=alice).entity_refs == []
