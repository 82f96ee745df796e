"""The freshness pipeline embeds a keyword candidate that has no vector stored yet."""

import pytest

from memories.models import Memory
from retrieval.recall import recall
from tests.base import make_memory
from tests.fakes.openai_server import EMBEDDINGS, Answer, deterministic_vector

pytestmark = pytest.mark.django_db


def test_it_embeds_candidates_without_a_stored_vector(openai_embeddings, alice):
    stored = make_memory(
        alice,
        "Tennis racket restrung.",
        embedding=deterministic_vector("Tennis racket restrung.", 384),
    )
    fresh = make_memory(alice, "Tennis lesson booked for Friday.")  # no vector yet
    result = recall(alice, "tennis", pipeline="freshness", explain=True, dry_run=True)

    parts = {item.memory.pk: item.parts for item in [*result.memories, *result.cut]}
    assert parts[fresh.pk]["cosine"] is not None
    assert parts[stored.pk]["cosine"] is not None
    assert result.legs["rerank"].status == "ok"
    asked = [
        text
        for request in openai_embeddings.requests_to(EMBEDDINGS)
        for text in request.json["input"]
    ]
    # The query and the unembedded candidate, once each; the stored vector is reused.
    assert sorted(asked) == sorted(["tennis", "Tennis lesson booked for Friday."])
    # Nothing is written: the background task stores the memory's vector.
    assert Memory.objects.get(pk=fresh.pk).embedding is None


def test_it_reranks_what_it_can_when_the_provider_fails(openai_embeddings, alice, settings):
    settings.EMBEDDING_MAX_RETRIES = 0
    openai_embeddings.queue(EMBEDDINGS, *[Answer(status=500, body="{}") for _ in range(5)])
    make_memory(alice, "Tennis lesson booked for Friday.")
    result = recall(alice, "tennis", pipeline="freshness", dry_run=True)
    # The rerank stage failed; BM25's order stands, and the turn goes on.
    assert result.legs["rerank"].status == "failed"
    assert [item.memory.content for item in result.memories] == ["Tennis lesson booked for Friday."]
