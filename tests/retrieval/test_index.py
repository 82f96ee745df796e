"""The retrieval index (retrieval/index.py): rebuilt from the memories, paused for
bulk loads and built once afterwards, checked for missing or stale parts."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from memories.models import Memory
from memories.vectors import graph_distance
from retrieval import index
from retrieval.index import (
    build_settings,
    pause_pays,
    pause_vector_index,
    resume_vector_index,
    vector_index_paused,
    vector_index_state,
)
from retrieval.models import OwnerEntity, Posting
from tests.base import make_memory
from tests.fakes.fixtures import fake_openai  # noqa: F401

pytestmark = pytest.mark.django_db


def unit_vectors(count: int, seed: int = 3) -> list[list[float]]:
    vectors = np.random.default_rng(seed).standard_normal((count, settings.EMBEDDING_DIMENSIONS))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.tolist()


def nearest_through_the_graph(owner, vector: list[float]) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = on")
        distance = graph_distance("embedding", "%s", len(vector))
        cursor.execute(
            "EXPLAIN SELECT id FROM memories_memory WHERE status = 'active' "
            f"ORDER BY {distance} LIMIT 3",
            [str(vector)],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT id FROM memories_memory WHERE status = 'active' AND owner_id = %s "
            f"ORDER BY {distance} LIMIT 3",
            [owner.pk, str(vector)],
        )
        return plan, [row[0] for row in cursor.fetchall()]


def test_it_pauses_only_when_building_afterwards_pays(monkeypatch):
    assert not pause_pays(index.PAUSE_MIN_ROWS - 1, existing_vectors=0)
    assert pause_pays(10_000, existing_vectors=0)
    assert pause_pays(10_000, existing_vectors=40_000)  # 20 % of what the index will hold
    assert not pause_pays(10_000, existing_vectors=40_001)


def test_it_drops_and_builds_the_graph():
    assert vector_index_state() == "live"
    assert pause_vector_index()
    assert vector_index_state() == "paused"
    assert not pause_vector_index()
    assert resume_vector_index() is not None
    assert vector_index_state() == "live"
    assert resume_vector_index() is None


def test_it_sizes_the_build_for_the_rows():
    small = build_settings(1_000)
    large = build_settings(1_000_000)
    assert small["maintenance_work_mem"] == "66MB"
    assert large["maintenance_work_mem"] == "2993MB"
    assert build_settings(10_000_000)["maintenance_work_mem"] == f"{index.BUILD_MEMORY_CAP_MB}MB"
    assert int(large["max_parallel_maintenance_workers"]) >= 0


def test_it_rebuilds_the_graph_even_when_the_load_fails(monkeypatch):
    monkeypatch.setattr(index, "PAUSE_MIN_ROWS", 1)
    with pytest.raises(RuntimeError), vector_index_paused(5) as outcome:
        assert outcome["paused"]
        assert vector_index_state() == "paused"
        raise RuntimeError("the load failed")
    assert outcome["index_seconds"] is not None
    assert vector_index_state() == "live"


def test_it_imports_a_large_load_without_the_graph_and_builds_it_once(monkeypatch, alice, tmp_path):
    monkeypatch.setattr(index, "PAUSE_MIN_ROWS", 3)
    vectors = unit_vectors(4)
    path = tmp_path / "load.jsonl"
    path.write_text(
        "".join(
            json.dumps({"content": f"Memory {i}", "type": "semantic", "embedding": vector}) + "\n"
            for i, vector in enumerate(vectors)
        )
    )
    out = StringIO()
    call_command("import_memories", str(path), "--owner", "alice", stdout=out)
    assert "Imported 4 memories for alice in " in out.getvalue()
    assert ", then built the vector index in " in out.getvalue()
    assert vector_index_state() == "live"
    plan, nearest = nearest_through_the_graph(alice, vectors[2])
    assert "memory_embedding_hnsw" in plan
    assert Memory.objects.get(pk=nearest[0]).content == "Memory 2"


def test_it_imports_a_small_load_through_the_live_graph(alice, tmp_path):
    path = tmp_path / "small.jsonl"
    [vector] = unit_vectors(1)
    path.write_text(json.dumps({"content": "Hi", "type": "semantic", "embedding": vector}) + "\n")
    out = StringIO()
    call_command("import_memories", str(path), "--owner", "alice", stdout=out)
    assert "vector index" not in out.getvalue()
    assert vector_index_state() == "live"


def test_any_reembed_builds_a_graph_an_interrupted_load_left_missing(settings, fake_openai):  # noqa: F811
    settings.EMBEDDING_PROVIDER = "openai"
    settings.EMBEDDING_BASE_URL = fake_openai.base_url
    settings.EMBEDDING_MODEL = "text-embedding-3-small"
    pause_vector_index()  # as a load killed between pause and build leaves it
    out = StringIO()
    call_command("reembed", "--missing-only", stdout=out)
    assert vector_index_state() == "live"
    assert "Embedded 0 memories" in out.getvalue()
    assert "building the vector index" in out.getvalue()


# --- the derived tables ---------------------------------------------------------------


def derived_state() -> tuple[set, dict, dict]:
    """Postings, the dictionary's non-zero counts and each owner's summed corpus changes."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM retrieval_posting")
        postings = set(cursor.fetchall())
        cursor.execute(
            "SELECT owner_id, key, memories FROM retrieval_ownerentity WHERE memories > 0"
        )
        dictionary = {(owner, key): memories for owner, key, memories in cursor.fetchall()}
        cursor.execute(
            "SELECT owner_id, sum(documents), sum(total_length) FROM retrieval_ownercorpuschange "
            "GROUP BY owner_id HAVING sum(documents) <> 0"
        )
        corpus = {owner: (documents, length) for owner, documents, length in cursor.fetchall()}
    return postings, dictionary, corpus


def write_some_memories(alice, bob) -> list[Memory]:
    coffee = Memory.remember(alice, "Ann drinks coffee in Lisbon", "semantic", entities=["Ann"])
    coffee.supersede("Ann drinks tea in Lisbon", entities=["Ann", "Lisbon"])
    Memory.remember(alice, "Bergen is rainy", "episodic", entities=["Bergen"]).archive()
    Memory.remember(alice, "Ann plays chess", "episodic", entities=["ann", "Chess"])
    Memory.remember(bob, "Bob likes Oslo in winter", "preference", entities=["Oslo"])
    return list(Memory.objects.order_by("id"))


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        # DDL refuses to run while the writes' deferred foreign-key checks are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for statement in statements:
            cursor.execute(statement)


def test_it_rebuilds_what_the_triggers_keep(alice, bob):
    write_some_memories(alice, bob)
    kept = derived_state()
    assert kept[0] and kept[1] and kept[2]
    execute(
        "DELETE FROM retrieval_posting",
        "DELETE FROM retrieval_ownerentity",
        "DELETE FROM retrieval_ownercorpuschange",
    )
    assert derived_state() == (set(), {}, {})

    seconds = index.rebuild()

    assert set(seconds) == {"postings", "entity dictionary", "corpus sums"}
    assert derived_state() == kept


def test_it_rebuilds_corrupted_tables(alice, bob):
    write_some_memories(alice, bob)
    kept = derived_state()
    execute(
        "UPDATE retrieval_posting SET frequency = frequency + 7",
        "UPDATE retrieval_ownerentity SET memories = memories + 3",
        f"INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length) "
        f"VALUES ({alice.pk}, 40, 400)",
    )
    assert derived_state() != kept
    index.rebuild()
    assert derived_state() == kept


def test_it_rebuilds_one_owners_part_only(alice, bob):
    write_some_memories(alice, bob)
    kept_postings, kept_dictionary, kept_corpus = derived_state()
    execute(
        "DELETE FROM retrieval_posting",
        "DELETE FROM retrieval_ownerentity",
        "DELETE FROM retrieval_ownercorpuschange",
    )

    index.rebuild(alice.pk)

    postings, dictionary, corpus = derived_state()
    assert postings == {row for row in kept_postings if row[0] == alice.pk}
    assert dictionary == {key: n for key, n in kept_dictionary.items() if key[0] == alice.pk}
    assert corpus == {alice.pk: kept_corpus[alice.pk]}


def posting_key_definition() -> tuple[str, str] | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(c.oid), pg_get_indexdef(c.conindid) FROM pg_constraint c "
            "WHERE c.conrelid = 'retrieval_posting'::regclass AND c.contype = 'p'"
        )
        return cursor.fetchone()


def test_it_pauses_and_resumes_the_whole_index(alice, bob):
    write_some_memories(alice, bob)
    migrated_key = posting_key_definition()
    assert "INCLUDE (frequency, length, type, created_at, last_confirmed_at)" in migrated_key[0]
    kept = derived_state()
    index.pause()
    assert index.paused_triggers() == sorted(trigger.name for trigger in index.TRIGGERS)
    assert vector_index_state() == "paused"
    # The postings are filled again without their key, which is built once after.
    assert not index.posting_key_exists() and posting_key_definition() is None
    loaded = Memory.remember(alice, "Ann visits Porto", "episodic", entities=["Porto"])
    assert not Posting.objects.filter(memory_id=loaded.pk).exists()

    seconds = index.resume()

    assert index.paused_triggers() == []
    assert vector_index_state() == "live"
    assert set(seconds) == {
        "postings",
        "postings key",
        "entity dictionary",
        "corpus sums",
        "vector index",
    }
    # The same key as the migrations made, over the old rows and the one loaded.
    assert posting_key_definition() == migrated_key
    postings_now = derived_state()[0]
    assert {row[3] for row in postings_now - kept[0]} == {loaded.pk}  # row[3]: memory_id
    assert kept[0] <= postings_now
    assert Posting.objects.filter(memory_id=loaded.pk, kind="e", term="porto").exists()
    assert OwnerEntity.objects.get(owner=alice, key="porto").memories == 1
    assert index.check() == []
    # The triggers are back: the next write is indexed as it happens.
    later = Memory.remember(alice, "Ann leaves Porto", "episodic", entities=["Porto"])
    assert Posting.objects.filter(memory_id=later.pk, kind="e", term="porto").exists()


def test_it_resumes_nothing_when_nothing_is_paused(alice):
    make_memory(alice, "Tea in Porto")
    assert index.resume() == {}


# --- check -----------------------------------------------------------------------------


def ids(problems) -> list[str]:
    return [problem.id for problem in problems]


def test_it_passes_a_healthy_index(alice, bob):
    assert index.check() == []
    write_some_memories(alice, bob)
    assert index.check() == []


def test_it_reports_a_missing_trigger(alice):
    make_memory(alice, "Tea in Porto")
    execute("DROP TRIGGER memory_indexes_postings_on_update ON memories_memory")
    [problem] = index.check()
    assert problem.id == "retrieval.E003"
    assert problem.is_serious()
    assert "memory_indexes_postings_on_update" in problem.msg
    assert "no UPDATE reaches the postings" in problem.msg


def test_it_reports_a_missing_function():
    execute("DROP FUNCTION timothy_compact_owner_corpus()")
    [problem] = index.check()
    assert problem.id == "retrieval.E002"
    assert "timothy_compact_owner_corpus()" in problem.msg


def test_it_reports_a_missing_table_and_covering_index():
    execute("DROP TABLE retrieval_posting", "DROP INDEX memory_active_embeddings")
    assert ids(index.check()) == ["retrieval.E001", "retrieval.E006"]


def test_it_reports_a_missing_posting_key_and_a_rebuild_builds_it(alice, bob):
    write_some_memories(alice, bob)
    kept = derived_state()
    execute("ALTER TABLE retrieval_posting DROP CONSTRAINT retrieval_posting_pk")
    [problem] = index.check()
    assert problem.id == "retrieval.E007" and problem.is_serious()
    assert "rebuild_retrieval_index" in problem.hint

    seconds = index.rebuild(alice.pk)

    assert "postings key" in seconds
    assert index.check() == []
    assert derived_state() == kept


def test_it_reports_switched_off_triggers_and_a_paused_graph():
    index.pause()
    problems = index.check()
    assert ids(problems) == ["retrieval.E004"] * len(index.TRIGGERS) + [
        "retrieval.E007",
        "retrieval.W001",
    ]
    assert not problems[-1].is_serious()
    assert "rebuild_retrieval_index" in problems[0].hint


def test_it_warns_when_the_sample_disagrees_with_the_derived_tables(alice, bob):
    memories = write_some_memories(alice, bob)
    chess = next(m for m in memories if "chess" in m.content)
    execute(
        f"DELETE FROM retrieval_posting WHERE memory_id = {chess.pk} AND term = 'chess' "
        "AND kind = 'l'",
        f"UPDATE retrieval_ownerentity SET memories = 5 WHERE owner_id = {bob.pk}",
        f"INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length) "
        f"VALUES ({alice.pk}, 1, 0)",
    )
    problems = index.check()
    assert ids(problems) == ["retrieval.W002", "retrieval.W003", "retrieval.W004"]
    assert f"memories {chess.pk})" in problems[0].msg
    assert f"{bob.pk}:oslo" in problems[1].msg
    assert f"owners {alice.pk})" in problems[2].msg
    index.rebuild()
    assert index.check() == []


def test_it_warns_about_postings_left_on_a_memory_no_longer_active(alice):
    memory = make_memory(alice, "Tea in Porto")
    execute(
        "ALTER TABLE memories_memory DISABLE TRIGGER memory_indexes_postings_on_update",
        f"UPDATE memories_memory SET status = 'archived' WHERE id = {memory.pk}",
        "ALTER TABLE memories_memory ENABLE TRIGGER memory_indexes_postings_on_update",
    )
    assert "retrieval.W002" in ids(index.check())


def test_it_runs_as_a_system_check():
    call_command("check", "--database", "default", stdout=StringIO())
    execute("DROP TRIGGER memory_counts_owner_corpus ON memories_memory")
    with pytest.raises(SystemCheckError, match="memory_counts_owner_corpus"):
        call_command("check", "--database", "default", stdout=StringIO())
