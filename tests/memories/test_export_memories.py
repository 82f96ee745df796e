from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from memories.models import Memory
from tests.base import make_memory, stamp

pytestmark = pytest.mark.django_db


def export(owner: str, path: Path | None = None) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    args = [str(path)] if path else []
    call_command("export_memories", *args, "--owner", owner, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def build_history(owner) -> None:
    """Every status, a supersede chain, a merge and an embedding."""
    now = timezone.now()
    Memory.remember(owner, "Alice's birthday is 3 May.", Memory.Type.SEMANTIC, session_id="s1")
    Memory.propose(owner, "Alice may like opera.", Memory.Type.PREFERENCE, confidence=0.3)
    Memory.propose(owner, "Alice hates Bach.", Memory.Type.PREFERENCE).reject()
    Memory.remember(owner, "Alice had a cold.", Memory.Type.EPISODIC).archive()
    lyon = make_memory(
        owner,
        "Alice lives in Lyon.",
        entities=["Alice", "Lyon"],
        created_at=now - timedelta(days=400),
        metadata={"phase": "turn_end"},
        embedding=[(i % 7) / 7 for i in range(settings.EMBEDDING_DIMENSIONS)],
    )
    lyon.supersede("Alice lives in Paris.", entities=["Alice", "Paris"]).supersede(
        "Alice lives in Paris, 11e.", type=Memory.Type.SEMANTIC
    )
    cat = make_memory(owner, "Alice owns a cat.", confidence=0.6)
    tom = make_memory(owner, "Alice's cat is Tom.", confidence=0.9)
    Memory.merge([cat, tom], "Alice has a cat named Tom.")
    stamp(Memory.objects.get(content="Alice has a cat named Tom."), now)
    proposal = Memory.propose(owner, "Alice drinks coffee.", Memory.Type.PREFERENCE)
    proposal.supersede("Alice drinks decaf coffee.")


def by_content(lines: str) -> dict[str, dict]:
    """Records keyed by content, ids replaced by the content they stand for."""
    records = [json.loads(line) for line in lines.splitlines()]
    content_of = {record["id"]: record["content"] for record in records}
    result = {}
    for record in records:
        record["superseded_by"] = content_of.get(record["superseded_by"])
        del record["id"]
        result[record["content"]] = record
    return result


def test_it_round_trips_memories_and_chains_into_another_owner(alice, bob, tmp_path):
    build_history(alice)
    path = tmp_path / "alice.jsonl"

    export("alice", path)
    call_command("import_memories", str(path), "--owner", "bob", stdout=StringIO())

    alices, bobs = export("alice")[0], export("bob")[0]
    assert by_content(bobs) == by_content(alices)
    assert len(by_content(alices)) == Memory.objects.for_owner(alice).count() == 12
    alice_head = Memory.objects.for_owner(alice).get(content="Alice lives in Paris, 11e.")
    bob_head = Memory.objects.for_owner(bob).get(content="Alice lives in Paris, 11e.")
    assert [m.content for m in bob_head.chain()] == [m.content for m in alice_head.chain()]
    merged = Memory.objects.for_owner(bob).get(content="Alice has a cat named Tom.")
    assert {m.content for m in merged.chain()} == {
        "Alice owns a cat.",
        "Alice's cat is Tom.",
        "Alice has a cat named Tom.",
    }
    assert not Memory.objects.for_owner(bob).filter(superseded_by__owner=alice).exists()


def test_it_writes_every_field_of_a_memory(alice):
    memory = make_memory(
        alice,
        "Alice lives in Lyon.",
        entities=["Alice", "Lyon"],
        confidence=0.8,
        created_at=timezone.now() - timedelta(days=3),
        session_id="chat-1",
        embedding=[0.1] * settings.EMBEDDING_DIMENSIONS,
    )
    new = memory.supersede("Alice lives in Paris.")

    out, _ = export("alice")

    first, second = (json.loads(line) for line in out.splitlines())
    assert first == {
        "id": memory.pk,
        "content": "Alice lives in Lyon.",
        "type": "semantic",
        "status": "superseded",
        "entities": ["Alice", "Lyon"],
        "confidence": 0.8,
        "created_at": memory.created_at.isoformat(),
        "last_confirmed_at": memory.last_confirmed_at.isoformat(),
        "last_retrieved_at": None,
        "source": "api",
        "session_id": "chat-1",
        "metadata": {},
        "embedding": [0.1] * settings.EMBEDDING_DIMENSIONS,
        "superseded_by": new.pk,
        "about": {
            "subject": "Alice",
            "kind": "person",
            "aspect": "home",
            "occasion": "",
            "set_by": "rules",
        },
    }
    assert second["id"] == new.pk
    assert second["superseded_by"] is None
    assert second["embedding"] is None


def test_it_writes_to_stdout_with_the_summary_on_stderr(alice, bob):
    make_memory(alice, "Alice likes tea.")
    make_memory(bob, "Bob likes coffee.")

    out, err = export("alice")

    assert [json.loads(line)["content"] for line in out.splitlines()] == ["Alice likes tea."]
    assert err.strip() == "Exported 1 memories of alice."


def test_it_writes_to_a_file_and_says_so(alice, tmp_path):
    make_memory(alice, "Alice likes tea.")
    path = tmp_path / "out.jsonl"

    out, _ = export("alice", path)

    assert out.strip() == f"Exported 1 memories of alice to {path}."
    assert json.loads(path.read_text())["content"] == "Alice likes tea."


def test_it_refuses_an_unknown_owner(db):
    with pytest.raises(CommandError, match="no owner named 'nobody'"):
        export("nobody")


def test_it_keeps_each_memory_on_one_line_for_any_reader(alice, bob, tmp_path):
    tricky = "Line\u2028separator, paragraph\u2029separator, next\x85line,\nnewline, é, 🐈."
    make_memory(alice, tricky, entities=["Zoë"])
    make_memory(alice, "Second.")
    path = tmp_path / "tricky.jsonl"

    export("alice", path)
    call_command("import_memories", str(path), "--owner", "bob", stdout=StringIO())

    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    assert "Zoë" in path.read_text(encoding="utf-8")
    assert Memory.objects.for_owner(bob).filter(content=tricky, entity_refs=["Zoë"]).exists()
