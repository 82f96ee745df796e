"""The related-memory classifier with the real local model (all-MiniLM-L6-v2), offline."""

from __future__ import annotations

import pytest

from memories import related
from memories.models import Memory
from memories.related import DUPLICATE, SEE_ALSO, UPDATE, find_related
from memories.related_evaluation import UNRELATED, load_pairs, predict, signals_of
from memories.tasks import embed_memory
from retrieval.embeddings import get_provider
from tests.base import make_memory

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

# A fixed subset of the labelled pairs (dev split), one of each kind.
SUBSET = {
    "siobhan-001": DUPLICATE,  # a staff nurse on cardiology, reworded
    "siobhan-006": DUPLICATE,  # Is teetotal. / Never drinks alcohol.
    "siobhan-011": DUPLICATE,  # one day trip to Blackpool, told twice
    "siobhan-018": UPDATE,  # her mum has moved
    "siobhan-021": UPDATE,  # Ellie's best friend Maisie / Ruby
    "siobhan-028": UPDATE,  # the parents' evening moved from the 10th to the 12th
    "siobhan-033": UPDATE,  # tea with two sugars / without
    "siobhan-038": UNRELATED,  # Lives in Chorlton. / Her sister Aoife lives in Chorlton.
    "siobhan-043": UNRELATED,  # her daughter Ellie / Ellie Brennan from the ward
    "siobhan-048": UNRELATED,  # another trip to Blackpool
    "siobhan-053": UNRELATED,  # works at / was born at the hospital
    "siobhan-060": UNRELATED,  # allergic to penicillin / to plaster adhesive
}


@pytest.fixture
def local_embeddings(settings, monkeypatch):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    # What is measured here is the labels, not the speed: a busy machine must
    # not turn a slow embedding into "compared by words only".
    monkeypatch.setattr(related, "EMBED_TIMEOUT_SECONDS", 120.0)
    monkeypatch.setattr(related, "QUERY_TIMEOUT_SECONDS", 120.0)
    return get_provider()


def test_it_labels_a_fixed_subset_as_labelled(local_embeddings):
    pairs = [pair for pair in load_pairs() if pair.id in SUBSET]
    assert len(pairs) == len(SUBSET)
    signals = signals_of(pairs, lambda texts: local_embeddings.embed(texts, timeout=120))
    assert {pair.id: predict(s) for pair, s in zip(pairs, signals, strict=True)} == SUBSET


def test_it_finds_the_update_and_the_duplicate_among_the_owners_memories(local_embeddings, alice):
    local_embeddings.warm_up()
    aisle = make_memory(alice, "Prefers an aisle seat.")
    leila = make_memory(alice, "His wife's name is Leila.", entities=["Leila"])
    make_memory(alice, "Is allergic to peanuts.")
    make_memory(alice, "Works as a nurse at St Mary's Hospital.")
    for memory in Memory.objects.all():
        assert embed_memory(memory.pk)

    window = find_related(alice, "Prefers a window seat.")
    married = find_related(alice, "He is married to Leila.", entities=["Leila"])
    brother = find_related(alice, "His brother prefers an aisle seat.")

    assert window.degraded == "" and len(window.embedding) == 384
    assert [(r.memory, r.relation) for r in window.related] == [(aisle, UPDATE)]
    assert [(r.memory, r.relation) for r in married.related] == [(leila, DUPLICATE)]
    # Close in meaning and in words, but about someone else: never a version of it.
    assert [r.relation for r in brother.related if r.memory == aisle] in ([], [SEE_ALSO])
