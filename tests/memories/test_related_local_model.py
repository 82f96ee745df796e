"""The related-memory classifier with the real local model (all-MiniLM-L6-v2), offline."""

from __future__ import annotations

import pytest

from memories import related
from memories.models import Memory
from memories.related import DUPLICATE, SEE_ALSO, UPDATE, find_related
from memories.related_evaluation import (
    UNRELATED,
    about_accuracy,
    cross_persona,
    fit_classifier,
    judgements,
    load_default_pairs,
    load_pairs,
    predict,
    signals_of,
)
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
    guesses = {pair.id: predict(s) for pair, s in zip(pairs, signals, strict=True)}
    assert guesses == SUBSET
    assert {pair.id: predict(s, learned=None) for pair, s in zip(pairs, signals, strict=True)} == (
        SUBSET
    )


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


def test_the_stored_classifier_is_what_fitting_the_labelled_pairs_gives(local_embeddings):
    """Refitting on the pairs reproduces memories/data/related-classifier.json: a
    changed signal or feature without a refit (``related_eval --fit``) fails here."""
    pairs = load_default_pairs()
    signals = signals_of(pairs, lambda texts: local_embeddings.embed(texts, timeout=120))
    stored = related.stored_classifier()
    assert stored is not None
    fitted = fit_classifier(pairs, signals)
    assert fitted.features == stored.features
    for fitted_row, stored_row in zip(fitted.weights, stored.weights, strict=True):
        assert fitted_row == pytest.approx(stored_row, abs=1e-3)


def test_on_personas_it_was_not_fitted_on_it_keeps_its_figures(local_embeddings):
    pairs = load_default_pairs()
    signals = signals_of(pairs, lambda texts: local_embeddings.embed(texts, timeout=120))
    figures = judgements(pairs, signals, cross_persona(pairs, signals))
    rules = judgements(pairs, signals, [predict(s, learned=None) for s in signals])
    assert (
        round(figures.related_precision, 3),
        round(figures.related_recall, 3),
        round(figures.relation_right, 3),
        round(figures.near_misses_flagged, 3),
    ) == (0.939, 0.893, 0.816, 0.067)
    assert figures.related_recall > rules.related_recall + 0.1
    assert figures.relation_right > rules.relation_right + 0.1


def test_about_accuracy_measures_the_about_the_service_stores(local_embeddings):
    # With embeddings, an aspect no rule reads is read by meaning, as when a
    # memory is written and embedded; the rules' own aspects stay as they are.
    pairs = load_default_pairs()
    by_rules = about_accuracy(pairs)
    stored = about_accuracy(pairs, local_embeddings.embed)
    assert stored.memories == by_rules.memories
    assert (stored.subject, stored.kind) == (by_rules.subject, by_rules.kind)
    assert stored.aspect > by_rules.aspect
