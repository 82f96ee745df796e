"""The vector index paused for bulk loads and built once afterwards (retrieval/index.py)."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from memories.models import Memory
from retrieval import index
from retrieval.index import (
    build_settings,
    pause_pays,
    pause_vector_index,
    resume_vector_index,
    vector_index_paused,
    vector_index_state,
)
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
        cursor.execute(
            "EXPLAIN SELECT id FROM memories_memory WHERE status = 'active' "
            "ORDER BY embedding <=> %s::vector LIMIT 3",
            [str(vector)],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT id FROM memories_memory WHERE status = 'active' AND owner_id = %s "
            "ORDER BY embedding <=> %s::vector LIMIT 3",
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
