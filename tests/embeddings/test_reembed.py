from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memories.models import EMBEDDING_HNSW_EF_CONSTRUCTION, Memory
from retrieval.embeddings import column_dimensions, get_provider
from tests.base import make_memory
from tests.fakes.openai_server import EMBEDDINGS, Answer, deterministic_vector


def reembed(*args: str) -> str:
    out = StringIO()
    call_command("reembed", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def vector_of(memory: Memory) -> list[float] | None:
    memory.refresh_from_db()
    return None if memory.embedding is None else list(memory.embedding)


def test_it_fills_only_missing_embeddings(openai_embeddings, alice):
    missing = make_memory(alice, "Alice likes tea.")
    kept = make_memory(alice, "Alice likes coffee.", embedding=[0.25] * 384)
    archived = make_memory(alice, "Alice liked mate.", status=Memory.Status.ARCHIVED)
    output = reembed("--missing-only")
    assert "Embedded 1 memories" in output
    assert vector_of(missing) == pytest.approx(
        deterministic_vector("Alice likes tea.", 384), abs=1e-6
    )
    assert vector_of(kept) == [0.25] * 384
    assert vector_of(archived) is None


def test_it_reembeds_everything_of_one_owner(openai_embeddings, alice, bob):
    alices = make_memory(alice, "Alice likes tea.", embedding=[0.25] * 384)
    proposed = make_memory(alice, "Alice may like jazz.", status=Memory.Status.PROPOSED)
    bobs = make_memory(bob, "Bob likes tea.", embedding=[0.25] * 384)
    reembed("--owner", "alice")
    assert vector_of(alices) == pytest.approx(
        deterministic_vector("Alice likes tea.", 384), abs=1e-6
    )
    assert vector_of(proposed) == pytest.approx(
        deterministic_vector("Alice may like jazz.", 384), abs=1e-6
    )
    assert vector_of(bobs) == [0.25] * 384


def test_it_sends_batches_of_the_given_size(openai_embeddings, alice):
    for i in range(5):
        make_memory(alice, f"Fact number {i}.")
    reembed("--batch-size", "2")
    assert [len(r.json["input"]) for r in openai_embeddings.requests_to(EMBEDDINGS)] == [2, 2, 1]


def test_it_sends_512_memories_a_call_by_default(openai_embeddings, alice, settings):
    # A provider that would take more at once: the calls themselves stop at 512.
    settings.EMBEDDING_BATCH_SIZE = 1000
    Memory.objects.bulk_create(
        Memory(owner=alice, type="semantic", content=f"Fact number {i}.") for i in range(513)
    )
    reembed()
    assert [len(r.json["input"]) for r in openai_embeddings.requests_to(EMBEDDINGS)] == [512, 1]


@pytest.mark.parametrize("option", ["--batch-size", "--threads"])
@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_it_refuses_a_count_that_is_not_positive(option, value):
    with pytest.raises(CommandError, match=f"argument {option}: "):
        reembed(option, value)


def test_it_resumes_after_a_failure(openai_embeddings, alice):
    memories = [make_memory(alice, f"Fact number {i}.") for i in range(4)]
    openai_embeddings.queue(
        EMBEDDINGS,
        Answer(json=openai_embeddings.embeddings_body(["Fact number 0.", "Fact number 1."])),
        Answer(status=400, json={"error": {"message": "bad request"}}),
    )
    with pytest.raises(CommandError, match=f"--start-after {memories[1].pk}"):
        reembed("--missing-only", "--batch-size", "2")
    assert [vector_of(m) is not None for m in memories] == [True, True, False, False]
    reembed("--missing-only", "--batch-size", "2")
    assert all(vector_of(m) is not None for m in memories)
    # The resumed run asked only for what was missing.
    assert openai_embeddings.requests_to(EMBEDDINGS)[-1].json["input"] == [
        "Fact number 2.",
        "Fact number 3.",
    ]


def embedding_index_definition() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_embedding_hnsw'")
        return cursor.fetchone()[0]


def test_it_converts_the_column_when_the_dimension_changes(openai_embeddings, settings, alice):
    migrated_index = embedding_index_definition()
    old = make_memory(alice, "Alice likes tea.", embedding=[0.25] * 384)
    superseded_target = make_memory(alice, "Alice likes green tea.", embedding=[0.5] * 384)
    settings.EMBEDDING_DIMENSIONS = 8
    openai_embeddings.dimensions = 8
    assert get_provider().dimensions == 8
    output = reembed()
    assert "from 384 to 8 dimensions" in output
    assert column_dimensions() == 8
    assert vector_of(old) == pytest.approx(deterministic_vector("Alice likes tea.", 8), abs=1e-6)
    assert vector_of(superseded_target) == pytest.approx(
        deterministic_vector("Alice likes green tea.", 8), abs=1e-6
    )
    # Rebuilt as the migrations build it, for the new dimension: the graph's
    # half-precision cast names it.
    assert "halfvec(384)" in migrated_index
    assert embedding_index_definition() == migrated_index.replace("halfvec(384)", "halfvec(8)")
    assert f"ef_construction='{EMBEDDING_HNSW_EF_CONSTRUCTION}'" in migrated_index
    assert "'active'" in migrated_index


def test_it_refuses_to_convert_for_one_owner_only(openai_embeddings, settings, alice):
    settings.EMBEDDING_DIMENSIONS = 8
    openai_embeddings.dimensions = 8
    with pytest.raises(CommandError, match="without --owner"):
        reembed("--owner", "alice")
    assert column_dimensions() == 384


def test_it_needs_a_provider(settings, db):
    settings.EMBEDDING_PROVIDER = "none"
    with pytest.raises(CommandError, match="No embedding provider"):
        reembed()
