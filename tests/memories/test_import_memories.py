from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from io import BytesIO, StringIO, TextIOWrapper
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from memories import io
from memories.io import PROGRESS_MIN_BYTES
from memories.models import MAX_ENTITIES, MAX_ENTITY_CHARS, Memory, MemoryEvent
from retrieval import index
from retrieval.models import OwnerEntity

pytestmark = pytest.mark.django_db

GOOD = {"content": "Alice likes tea.", "type": "preference"}


def write_lines(path: Path, lines: list[dict | str | bytes]) -> Path:
    with path.open("wb") as out:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line)
            if isinstance(line, str):
                line = line.encode()
            out.write(line + b"\n")
    return path


def run_import(path: Path, owner: str = "alice", *extra: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_memories", str(path), "--owner", owner, *extra, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def failing_import(path: Path, owner: str = "alice") -> tuple[CommandError, str]:
    err = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("import_memories", str(path), "--owner", owner, stderr=err)
    return raised.value, err.getvalue()


def test_it_imports_a_line_with_every_field(alice, tmp_path):
    embedding = [0.5] * settings.EMBEDDING_DIMENSIONS
    path = write_lines(
        tmp_path / "in.jsonl",
        [
            {
                "content": "Alice flew to Oslo in March.",
                "type": "episodic",
                "status": "archived",
                "entities": ["Alice", "Oslo", "alice"],
                "confidence": 0.75,
                "created_at": "2024-03-01T10:00:00Z",
                "last_confirmed_at": "2024-03-02T11:00:00+02:00",
                "last_retrieved_at": "2024-04-01T00:00:00",
                "source": "extraction",
                "session_id": "chat-9",
                "metadata": {"turn": 4},
                "embedding": embedding,
            }
        ],
    )

    out, _ = run_import(path)

    memory = Memory.objects.for_owner(alice).get()
    assert "Imported 1 memories for alice" in out
    assert memory.content == "Alice flew to Oslo in March."
    assert (memory.type, memory.status, memory.source) == ("episodic", "archived", "extraction")
    assert memory.entity_refs == ["Alice", "Oslo"]
    assert memory.confidence == 0.75
    assert memory.created_at == datetime(2024, 3, 1, 10, tzinfo=UTC)
    assert memory.last_confirmed_at == datetime(2024, 3, 2, 9, tzinfo=UTC)
    assert memory.last_retrieved_at == datetime(2024, 4, 1, tzinfo=UTC)
    assert memory.session_id == "chat-9"
    assert memory.metadata == {"turn": 4}
    assert list(memory.embedding) == embedding


def test_it_fills_defaults_and_logs_an_imported_event(alice, tmp_path):
    path = write_lines(tmp_path / "facts.jsonl", [GOOD])

    run_import(path)

    memory = Memory.objects.for_owner(alice).get()
    assert memory.status == Memory.Status.ACTIVE
    assert memory.source == Memory.Source.IMPORT
    assert memory.confidence == Memory._meta.get_field("confidence").default
    # No entities on the line: the store finds the ones the text names.
    assert memory.entity_refs == ["Alice"]
    assert memory.embedding is None
    event = MemoryEvent.objects.get(memory=memory)
    assert event.action == MemoryEvent.Action.IMPORTED
    assert (event.owner, event.actor, event.via) == (alice, None, "import")
    assert event.reason == "imported from facts.jsonl"
    assert event.data == {"line": 1}


def test_it_rebuilds_chains_whatever_the_line_order(alice, tmp_path):
    lines = [
        {"id": "v1", "superseded_by": "v2", "status": "superseded", **GOOD, "content": "v1"},
        {"id": "v2", "superseded_by": "v3", "status": "superseded", **GOOD, "content": "v2"},
        {"id": "w1", "superseded_by": "v3", "status": "superseded", **GOOD, "content": "w1"},
        {"id": "v3", "superseded_by": "v4", "status": "superseded", **GOOD, "content": "v3"},
        {"id": "v4", **GOOD, "content": "v4", "created_at": "2030-01-01T00:00:00Z"},
    ]
    path = write_lines(tmp_path / "chain.jsonl", lines)

    run_import(path)

    mine = Memory.objects.for_owner(alice)
    head = mine.get(content="v4")
    assert list(mine.heads()) == [head]
    assert mine.get(content="v1").head_id() == head.pk
    assert mine.get(content="w1").superseded_by == mine.get(content="v3")
    assert {m.content for m in head.chain()} == {"v1", "v2", "w1", "v3", "v4"}
    assert MemoryEvent.objects.filter(owner=alice, action="imported").count() == 5
    assert MemoryEvent.objects.get(memory=mine.get(content="w1")).data == {"line": 3, "id": "w1"}


def test_it_reads_stdin_when_the_file_is_a_dash(alice, monkeypatch):
    stdin = TextIOWrapper(BytesIO(json.dumps(GOOD).encode() + b"\n"), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)

    out, _ = run_import(Path("-"))

    assert "Imported 1 memories for alice" in out
    event = MemoryEvent.objects.get(owner=alice)
    assert event.reason == "imported from stdin"


def test_it_skips_blank_lines_and_a_byte_order_mark(alice, tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n\n   \n")

    run_import(path)

    assert Memory.objects.for_owner(alice).count() == 1


NUL = "\x00"
BAD_LINES = [
    ({"type": "semantic"}, "missing content"),
    ({"content": "   ", "type": "semantic"}, "missing content"),
    ({"content": "x" * (settings.MAX_CONTENT_CHARS + 1), "type": "semantic"}, "at most"),
    (
        {**GOOD, "entities": [f"name {n}" for n in range(MAX_ENTITIES + 1)]},
        f"entities: At most {MAX_ENTITIES} entities",
    ),
    ({**GOOD, "entities": ["x" * (MAX_ENTITY_CHARS + 1)]}, "entities: An entity is at most"),
    ({"content": "A fact."}, "missing type"),
    ({**GOOD, "type": "gossip"}, "unknown type 'gossip'"),
    ({**GOOD, "status": "deleted"}, "unknown status 'deleted'"),
    ({**GOOD, "source": "rumour"}, "unknown source 'rumour'"),
    ({**GOOD, "created_at": "yesterday"}, "created_at 'yesterday' is not an ISO 8601"),
    ({**GOOD, "last_confirmed_at": "2024-13-45T00:00:00"}, "last_confirmed_at"),
    ({**GOOD, "last_retrieved_at": 1700000000}, "last_retrieved_at 1700000000"),
    ({**GOOD, "embedding": [0.1, 0.2, 0.3]}, "embedding has 3 dimensions; this service stores"),
    ({**GOOD, "embedding": ["a"] * settings.EMBEDDING_DIMENSIONS}, "list of numbers"),
    ({**GOOD, "embedding": [1e39] * settings.EMBEDDING_DIMENSIONS}, "too large"),
    ({**GOOD, "embedding": [10**400] * settings.EMBEDDING_DIMENSIONS}, "too large"),
    ({**GOOD, "embedding": [True] * settings.EMBEDDING_DIMENSIONS}, "list of numbers"),
    ({**GOOD, "embedding": [None] * settings.EMBEDDING_DIMENSIONS}, "list of numbers"),
    (
        '{"content": "Likes tea.", "type": "semantic", "embedding": ['
        + ", ".join(["1e309"] * settings.EMBEDDING_DIMENSIONS)
        + "]}",
        "too large",
    ),
    ({**GOOD, "content": f"Alice{NUL}Bob"}, "NUL byte"),
    ({**GOOD, "entities": [f"a{NUL}"]}, "NUL byte"),
    ('{"content": "Alice\x00", "type": "semantic"}', "NUL byte"),
    ('{"content": "unfinished', "not JSON"),
    ("[1, 2, 3]", "not a JSON object"),
    ({**GOOD, "confidence": 1.5}, "confidence 1.5 is not a number from 0 to 1"),
    ({**GOOD, "confidence": -0.1}, "confidence -0.1"),
    ({**GOOD, "confidence": True}, "confidence True"),
    ('{"content": "a", "type": "semantic", "confidence": NaN}', "NaN is not a number"),
    ({**GOOD, "entities": "Alice"}, "entities must be a list of strings"),
    ({**GOOD, "metadata": [1]}, "metadata must be a JSON object"),
    ({**GOOD, "session_id": "s" * 201}, "session_id is longer than 200"),
    ({**GOOD, "colour": "red"}, "unknown field 'colour'"),
    ({**GOOD, "status": "superseded"}, "superseded_by names no successor"),
    ({**GOOD, "status": "superseded", "superseded_by": 999}, "999 is not the id of a line"),
    ({**GOOD, "superseded_by": 1}, "superseded_by is set but status is active"),
    ({**GOOD, "id": 7, "status": "superseded", "superseded_by": 7}, "cannot supersede itself"),
    ({**GOOD, "id": True}, "id must be an integer or a non-empty string"),
    (b'{"content": "caf\xe9", "type": "semantic"}', "not valid UTF-8"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_LINES)
def test_it_reports_a_bad_line_and_keeps_the_good_ones(alice, tmp_path, bad, reason):
    path = write_lines(tmp_path / "mixed.jsonl", [GOOD, bad, {**GOOD, "content": "Third."}])

    error, err = failing_import(path)

    assert "Imported 2 memories for alice; 1 lines failed" in str(error)
    [reported] = err.splitlines()
    assert reported.startswith("line 2: ")
    assert reason in reported
    assert sorted(Memory.objects.for_owner(alice).values_list("content", flat=True)) == [
        "Alice likes tea.",
        "Third.",
    ]


def test_it_fails_the_predecessors_of_a_failed_successor(alice, tmp_path):
    lines = [
        {**GOOD, "id": 1, "status": "superseded", "superseded_by": 2, "content": "one"},
        {**GOOD, "id": 2, "status": "superseded", "superseded_by": 3, "content": "two"},
        {**GOOD, "id": 3, "type": "gossip", "content": "three"},
        {**GOOD, "id": 4, "content": "four"},
    ]
    path = write_lines(tmp_path / "broken-chain.jsonl", lines)

    error, err = failing_import(path)

    assert err.splitlines() == [
        "line 1: its successor 2 (line 2) failed",
        "line 2: its successor 3 (line 3) failed",
        "line 3: unknown type 'gossip' (one of semantic, preference, episodic, reflection)",
    ]
    assert "3 lines failed" in str(error)
    assert list(Memory.objects.for_owner(alice).values_list("content", flat=True)) == ["four"]


def test_it_refuses_a_cycle_and_a_reused_id(alice, tmp_path):
    lines = [
        {**GOOD, "id": "a", "status": "superseded", "superseded_by": "b", "content": "fact a"},
        {**GOOD, "id": "b", "status": "superseded", "superseded_by": "a", "content": "fact b"},
        {**GOOD, "id": "c", "content": "fact c"},
        {**GOOD, "id": "c", "content": "c again"},
    ]
    path = write_lines(tmp_path / "cycle.jsonl", lines)

    _, err = failing_import(path)

    assert err.splitlines() == [
        "line 1: its superseded_by chain goes round in a cycle",
        "line 2: its superseded_by chain goes round in a cycle",
        "line 4: id 'c' is already used on line 3",
    ]
    assert list(Memory.objects.for_owner(alice).values_list("content", flat=True)) == ["fact c"]


def test_it_refuses_an_unknown_owner_or_a_missing_file(alice, tmp_path):
    path = write_lines(tmp_path / "in.jsonl", [GOOD])

    with pytest.raises(CommandError, match="no owner named 'nobody'"):
        run_import(path, "nobody")
    with pytest.raises(CommandError, match="No such file"):
        run_import(tmp_path / "missing.jsonl")

    assert not Memory.objects.exists()


def test_it_keeps_each_owners_import_to_that_owner(alice, bob, tmp_path):
    path = write_lines(tmp_path / "in.jsonl", [GOOD])

    run_import(path, "bob")

    assert Memory.objects.for_owner(bob).count() == 1
    assert Memory.objects.for_owner(alice).count() == 0


def test_it_shows_a_progress_bar_on_large_files_only(alice, tmp_path):
    line = {**GOOD, "content": "Alice likes tea. " * 50}
    count = PROGRESS_MIN_BYTES // len(json.dumps(line)) + 10
    large = write_lines(tmp_path / "large.jsonl", [line] * count)
    small = write_lines(tmp_path / "small.jsonl", [GOOD])

    _, large_err = run_import(large)
    _, small_err = run_import(small)
    _, quiet_err = run_import(large, "alice", "--no-progress")

    assert "Writing" in large_err and f"{count}/{count}" in large_err
    assert small_err == ""
    assert quiet_err == ""
    assert Memory.objects.for_owner(alice).count() == 2 * count + 1


def entity_counts(owner) -> dict[str, int]:
    return dict(OwnerEntity.objects.filter(owner=owner).values_list("key", "memories"))


def rebuilt_entity_counts(owner) -> dict[str, int]:
    index.rebuild()
    return entity_counts(owner)


def test_it_keeps_the_entity_dictionary_right(alice, bob, tmp_path):
    Memory.remember(bob, "Bob met Alice.", Memory.Type.EPISODIC, entities=["Alice"])
    lines = [
        {**GOOD, "entities": ["Alice", "Tea"]},
        {**GOOD, "content": "Alice likes green tea.", "entities": ["alice", "Green tea"]},
        {**GOOD, "content": "Old.", "entities": ["Tea"], "status": "archived"},
        {**GOOD, "id": 1, "status": "superseded", "superseded_by": 2, "entities": ["Lyon"]},
        {**GOOD, "id": 2, "content": "Alice lives in Paris.", "entities": ["Paris"]},
    ]
    path = write_lines(tmp_path / "entities.jsonl", lines)

    run_import(path)

    assert entity_counts(alice) == {"alice": 2, "tea": 1, "green tea": 1, "paris": 1}
    assert entity_counts(bob) == {"alice": 1}


def large_file(path: Path, count: int) -> Path:
    """``count`` lines, a tenth of them superseded by the next, naming a few entities."""
    lines = []
    for i in range(count):
        line = {
            **GOOD,
            "id": i,
            "content": f"Memory {i}.",
            "entities": ["Alice", f"Topic {i % 50}", f"topic {i % 50}"],
            "status": ["active", "active", "proposed", "archived"][i % 4],
        }
        if i % 10 == 1:
            line.update(status="superseded", superseded_by=i + 1)
        lines.append(line)
    return write_lines(path, lines)


def test_it_counts_a_large_import_like_a_recount(alice, bob, tmp_path):
    # Larger than the 2,000 lines from which imports used to switch the counter off.
    Memory.remember(alice, "Already here.", Memory.Type.SEMANTIC, entities=["Alice", "Oslo"])
    Memory.remember(bob, "Bob's.", Memory.Type.SEMANTIC, entities=["Alice"])
    path = large_file(tmp_path / "large.jsonl", 2500)

    run_import(path, "alice", "--no-progress")

    counted = entity_counts(alice)
    active = Memory.objects.for_owner(alice).active()
    assert counted["alice"] == active.count()
    assert counted["topic 7"] == active.filter(entity_refs__contains=["Topic 7"]).count()
    assert counted == rebuilt_entity_counts(alice)
    assert entity_counts(bob) == {"alice": 1}


@pytest.mark.django_db(transaction=True)
def test_it_lets_other_writers_go_on_during_a_large_import(alice, bob, tmp_path):
    """The import holds no table lock: a write of another owner, or of the same
    owner naming other entities, goes in while the import's transaction is open."""
    path = large_file(tmp_path / "large.jsonl", 2500)
    imported, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def hold_an_import_open() -> None:
        try:
            with transaction.atomic():
                with path.open("rb") as lines:
                    io.import_memories(lines, alice)
                imported.set()
                assert release.wait(timeout=60)
        except BaseException as error:
            failures.append(error)
            imported.set()
        finally:
            connection.close()

    importer = threading.Thread(target=hold_an_import_open)
    importer.start()
    try:
        assert imported.wait(timeout=120) and not failures
        with transaction.atomic(), connection.cursor() as cursor:
            # Waiting on a lock the import holds fails here instead of hanging.
            cursor.execute("SET LOCAL lock_timeout = '5s'")
            Memory.remember(bob, "Bob's.", Memory.Type.SEMANTIC, entities=["Alice"])
            Memory.remember(alice, "During.", Memory.Type.SEMANTIC, entities=["Bergen"])
    finally:
        release.set()
        importer.join(timeout=60)
    assert not failures

    assert Memory.objects.for_owner(alice).count() == 2501
    assert entity_counts(bob) == {"alice": 1}
    assert entity_counts(alice) == rebuilt_entity_counts(alice)
