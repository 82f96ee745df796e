"""The embedding of a new memory is computed in the background, never in the write's way."""

from __future__ import annotations

import pytest
from django_q.models import OrmQ, Task

from memories.models import Memory
from memories.tasks import embed_memory, embed_missing
from tests.base import make_memory
from tests.fakes.openai_server import EMBEDDINGS, Answer, deterministic_vector


def test_it_embeds_a_new_memory_after_commit(
    openai_embeddings, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory = Memory.remember(alice, "Alice prefers aisle seats.", Memory.Type.PREFERENCE)
    memory.refresh_from_db()
    assert list(memory.embedding) == pytest.approx(
        deterministic_vector("Alice prefers aisle seats.", 384), abs=1e-6
    )


def test_it_embeds_the_new_version_of_a_superseded_memory(
    openai_embeddings, alice, django_capture_on_commit_callbacks
):
    old = make_memory(alice, "Alice lives in Porto.")
    with django_capture_on_commit_callbacks(execute=True):
        new = old.supersede("Alice lives in Lisbon.")
    new.refresh_from_db()
    assert list(new.embedding) == pytest.approx(
        deterministic_vector("Alice lives in Lisbon.", 384), abs=1e-6
    )


def test_it_queues_nothing_without_a_provider(settings, alice, django_capture_on_commit_callbacks):
    settings.EMBEDDING_PROVIDER = "none"
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        memory = Memory.remember(alice, "Alice prefers aisle seats.", Memory.Type.PREFERENCE)
    assert len(callbacks) == 1  # the write did announce itself
    assert Task.objects.count() == 0
    assert OrmQ.objects.count() == 0
    memory.refresh_from_db()
    assert memory.embedding is None


def test_it_keeps_the_write_when_the_provider_fails(
    openai_embeddings, alice, django_capture_on_commit_callbacks
):
    openai_embeddings.queue(EMBEDDINGS, Answer(status=400, json={"error": {"message": "no"}}))
    with django_capture_on_commit_callbacks(execute=True):
        memory = Memory.remember(alice, "Alice prefers aisle seats.", Memory.Type.PREFERENCE)
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert memory.embedding is None
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 1


def test_it_keeps_the_write_when_the_provider_is_down(
    openai_embeddings, settings, alice, django_capture_on_commit_callbacks
):
    settings.EMBEDDING_BASE_URL = "http://127.0.0.1:9/v1"
    with django_capture_on_commit_callbacks(execute=True):
        memory = Memory.remember(alice, "Alice prefers aisle seats.", Memory.Type.PREFERENCE)
    assert Memory.objects.get(pk=memory.pk).embedding is None


def test_it_leaves_an_existing_embedding_alone(openai_embeddings, alice):
    memory = make_memory(alice, "Alice prefers aisle seats.", embedding=[0.5] * 384)
    assert embed_memory(memory.pk) is False
    assert openai_embeddings.requests_to(EMBEDDINGS) == []
    memory.refresh_from_db()
    assert list(memory.embedding) == [0.5] * 384


def test_it_catches_up_on_memories_left_without_a_vector(openai_embeddings, alice, bob):
    # Written without the on-commit hook: as after a lost task or an import.
    lost = make_memory(alice, "Alice keeps bees.")
    imported = make_memory(bob, "Bob sings in a choir.", status=Memory.Status.PROPOSED)
    kept = make_memory(alice, "Alice prefers aisle seats.", embedding=[0.5] * 384)
    assert "2" in embed_missing()
    for memory in (lost, imported):
        memory.refresh_from_db()
        assert list(memory.embedding) == pytest.approx(
            deterministic_vector(memory.content, 384), abs=1e-6
        )
    kept.refresh_from_db()
    assert list(kept.embedding) == [0.5] * 384


def test_it_skips_the_catch_up_without_a_provider(settings, alice):
    settings.EMBEDDING_PROVIDER = "none"
    memory = make_memory(alice, "Alice keeps bees.")
    assert embed_missing() == "no embedding provider"
    memory.refresh_from_db()
    assert memory.embedding is None
