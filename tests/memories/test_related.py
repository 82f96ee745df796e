"""Related memories: the signals of a pair, the classifier, the search and its degradation."""

from __future__ import annotations

import math

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError
from hypothesis import given, settings
from hypothesis import strategies as st

from memories import related
from memories.about import About
from memories.models import Memory
from memories.related import (
    DUPLICATE,
    NO_PROVIDER,
    SEE_ALSO,
    UPDATE,
    PairSignals,
    _meet,
    _unmatched,
    classify,
    find_related,
    place_replaced,
    related_for_memories,
    value_tokens,
)
from memories.related_evaluation import (
    FIRST_PAIRS,
    about_accuracy,
    judgements,
    load_pairs,
    signals_of,
)
from retrieval import legs
from tests.base import make_memory
from tests.fakes.openai_server import EMBEDDINGS, Answer


def signals(old: str, new: str, cosine: float | None = None, **kwargs) -> PairSignals:
    lexemes = {word.lower().strip(".,") for word in f"{old} {new}".split()}
    return PairSignals.of(
        old_text=old,
        new_text=new,
        old_lexemes=[w for w in lexemes if w in old.lower()],
        new_lexemes=[w for w in lexemes if w in new.lower()],
        cosine=cosine,
        **kwargs,
    )


# --- the signals and the classifier (no database) -----------------------------------


def test_it_reads_values_from_numbers_names_and_dates():
    assert value_tokens("His son Tom is seven.") == {"tom", "7"}
    assert value_tokens("Wedding anniversary: June 2.") == {"june", "2"}
    assert value_tokens("Works remotely on Fridays.") == {"friday"}
    assert value_tokens("Uses an iPhone 15.", ["iPhone 15"]) == {"iphone", "15"}


def test_it_sees_a_conflicting_value_only_when_each_side_has_its_own():
    assert signals("His shoe size is 42.", "His shoe size is 43.").value_conflict
    assert not signals("His birthday is on 14 March.", "Was born on March 14.").value_conflict
    assert not signals("Uses a Pixel 8 phone.", "His phone is a Google Pixel 8.").value_conflict


def test_it_sees_a_change_said_in_the_new_text():
    assert signals("Eats meat.", "Doesn't eat meat anymore.").changed
    assert signals("Lives in Lisbon.", "Has moved to Berlin.").changed
    assert not signals("Lives in Lisbon.", "His home is in Lisbon.").changed


def test_it_sees_a_value_named_on_one_side_only():
    bank = signals("Her bank is Nordea.", "Banks with OP Tampere.")
    assert bank.new_value and bank.old_value
    allergy = signals("Allergic to penicillin.", "Has a penicillin allergy.")
    assert not allergy.new_value and not allergy.old_value
    school = signals(
        "Ellie's school is Oswald Road Primary.", "Ellie goes to Oswald Road Primary School."
    )
    assert school.new_value and not school.old_value


def test_it_sees_a_choice_reversed():
    assert signals("Prefers soba to udon.", "Prefers udon to soba.").reversed_choice
    assert signals(
        "Likes to winter in Arizona.", "Prefers the Gulf Coast to Arizona."
    ).reversed_choice
    assert signals(
        "Takes the 86 bus to work.", "Now cycles instead of getting the bus."
    ).reversed_choice
    assert signals("Plays with a pick.", "Doesn't like using a pick.").reversed_choice
    # The same choice set against the same thing, reworded.
    assert not signals(
        "Prefers to be paid per word rather than per hour.",
        "Likes charging per word instead of by the hour.",
    ).reversed_choice
    # "Prefers to …" sets nothing aside.
    assert not signals(
        "Prefers to walk the dog at dawn.", "Prefers to walk at dawn."
    ).reversed_choice


def test_it_tells_facts_about_other_people_apart():
    assert signals("His mother lives in Porto.", "His father lives in Coimbra.").other_person
    assert signals("Is 34 years old.", "His wife is 36.").other_person
    assert not signals(
        "His wife's name is Leila.",
        "He is married to Leila.",
        old_entities=["Leila"],
        new_entities=["Leila"],
    ).other_person
    assert not signals("His mother lives in Porto.", "His mum lives in Porto.").other_person
    # Every relation the subject reader knows (about.ROLE_WORDS), in one spelling.
    assert signals("His flatmate is Benja.", "His landlord is Benja.").other_person
    assert not signals("His housemate cooks.", "His roommate cooks.").other_person


def test_it_classifies_by_cosine_with_embeddings():
    assert classify(signals("Is afraid of heights.", "Has a fear of heights.", 0.92)) == (
        DUPLICATE,
        0.92,
    )
    assert classify(signals("Prefers an aisle seat.", "Prefers a window seat.", 0.69)) == (
        UPDATE,
        0.69,
    )
    # A conflicting value is never a duplicate, however close.
    assert classify(signals("His shoe size is 42.", "His shoe size is 43.", 0.95))[0] == UPDATE
    assert classify(signals("Loves sushi.", "Walks the dog at 7 pm.", 0.2))[0] is None
    assert classify(signals("Likes hiking.", "likes hiking", 0.4)) == (DUPLICATE, 1.0)


def _biased_classifier(unrelated: float, duplicate: float, update: float):
    """A classifier that ignores every signal: its bias alone sets the odds."""
    width = len(related.PAIR_FEATURES)
    return related.LearnedClassifier.from_document(
        {
            "format": related.CLASSIFIER_FORMAT,
            "classes": list(related.CLASSES),
            "features": [name for name, _ in related.PAIR_FEATURES],
            "mean": [0.0] * width,
            "scale": [1.0] * width,
            "weights": [[0.0, 0.0, 0.0]] * width
            + [[math.log(unrelated), math.log(duplicate), math.log(update)]],
        }
    )


def test_the_learned_classifier_calls_a_duplicate_only_when_it_is_clearly_one():
    pair = signals(
        "Is afraid of heights.",
        "Has a fear of heights.",
        0.92,
        old_about=About(aspect="fear"),
        new_about=About(aspect="fear"),
    )
    # Related by 0.8, but a duplicate by 0.55 only, under DUPLICATE_MIN_PROBABILITY.
    assert classify(pair, learned=_biased_classifier(0.2, 0.55, 0.25)) == (UPDATE, 0.92)
    assert classify(pair, learned=_biased_classifier(0.2, 0.7, 0.1)) == (DUPLICATE, 0.92)
    # Unrelated, but close: shown as "see also", never with an action.
    assert classify(pair, learned=_biased_classifier(0.6, 0.2, 0.2)) == (SEE_ALSO, 0.92)
    far = signals("Loves sushi.", "Walks the dog.", 0.2, old_about=About(), new_about=About())
    assert classify(far, learned=_biased_classifier(0.6, 0.2, 0.2)) == (None, 0.2)
    # Without embeddings (or with learned=None) the rules judge.
    assert classify(far, learned=None)[0] is None


def test_a_classifier_file_that_does_not_match_the_features_leaves_the_rules_to_judge(
    tmp_path, monkeypatch, caplog, settings
):
    stale = tmp_path / "related-classifier.json"
    stale.write_text(
        '{"format": "timothy-related-classifier/1", "embeddings": "local:all-MiniLM-L6-v2",'
        ' "features": ["cosine"]}'
    )
    settings.EMBEDDING_PROVIDER, settings.EMBEDDING_MODEL = "local", ""
    monkeypatch.setattr(related, "CLASSIFIER_PATH", stale)
    related.classifier_file.cache_clear()
    try:
        assert related.stored_classifier() is None
        assert "fit it again" in caplog.text
    finally:
        related.classifier_file.cache_clear()


def test_the_stored_classifier_judges_only_with_the_model_it_was_fitted_on(settings):
    # Fitted on the local MiniLM's cosines; another model's are on another scale.
    settings.EMBEDDING_PROVIDER, settings.EMBEDDING_MODEL = "local", ""
    assert related.stored_classifier() is not None
    settings.EMBEDDING_PROVIDER = "openai"
    assert related.stored_classifier() is None
    settings.EMBEDDING_PROVIDER, settings.EMBEDDING_MODEL = "local", "/models/another"
    assert related.stored_classifier() is None


def test_it_classifies_by_words_without_embeddings():
    assert classify(signals("His best friend is Jonas.", "Jonas is his best friend."))[0] == (
        DUPLICATE
    )
    assert classify(signals("Prefers an aisle seat.", "Prefers a window seat."))[0] == UPDATE
    assert classify(signals("Loves sushi.", "Walks the dog at 7 pm."))[0] is None


# --- the labelled pairs ---------------------------------------------------------------


@pytest.mark.django_db
def test_it_keeps_the_documented_figures_without_embeddings():
    # docs/review.md reports these; a change of the classifier must update both.
    pairs = load_pairs()
    figures = judgements(pairs, signals_of(pairs, None))
    assert len(pairs) == 408
    assert round(figures.related_precision, 3) == 0.923
    assert round(figures.related_recall, 3) == 0.661
    assert round(figures.relation_right, 3) == 0.606
    assert round(figures.near_misses_flagged, 3) == 0.063
    about = about_accuracy(pairs)
    assert (about.memories, round(about.subject, 3), round(about.aspect, 3)) == (786, 0.936, 0.431)


@pytest.mark.django_db
def test_it_judges_the_first_pairs_too():
    # The first labelled set (format 1: no types or abouts) still loads and is judged.
    pairs = load_pairs(FIRST_PAIRS)
    assert len(pairs) == 217
    assert judgements(pairs, signals_of(pairs, None)).related_precision > 0.8


@pytest.mark.django_db
def test_it_reports_the_judgements_per_split(capsys):
    call_command("related_eval")
    out = capsys.readouterr().out
    assert "No embedding provider" in out
    assert (
        "609 pairs: 135 duplicate, 191 update, 283 unrelated; 204 dev, 204 test, 201 holdout" in out
    )
    assert "-- all: 609 pairs · related at all P 0.924 R 0.595" in out
    assert "-- holdout: 201 pairs · related at all P 0.926 R 0.463" in out
    assert "near-misses flagged 0.057" in out
    assert "other-person 44/45" in out
    assert "what each memory is about, all: 1175 labelled memories: subject 0.932" in out


@pytest.mark.django_db
def test_fitting_needs_embeddings(settings):
    settings.EMBEDDING_PROVIDER = "none"
    with pytest.raises(CommandError, match="Fitting the classifier needs embeddings"):
        call_command("related_eval", "--fit")


# --- the search -------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_finds_duplicates_and_updates_by_words_and_entities(alice, bob):
    aisle = make_memory(alice, "Prefers an aisle seat on long flights.", "preference")
    leila = make_memory(alice, "His wife's name is Leila.", entities=["Leila"])
    make_memory(alice, "Is allergic to peanuts.")
    make_memory(alice, "Prefers a window seat on long flights.", status=Memory.Status.REJECTED)
    make_memory(bob, "Prefers a window seat on long flights.")

    window = find_related(alice, "Prefers a window seat on long flights.", type="preference")
    same = find_related(alice, "His wife's name is Leila", entities=["Leila"])

    assert [(r.memory, r.relation) for r in window.related] == [(aisle, UPDATE)]
    assert window.degraded == NO_PROVIDER
    assert window.to_list() == [
        {
            "id": aisle.pk,
            "relation": "update",
            "score": 0.667,
            "content": "Prefers an aisle seat on long flights.",
            "status": "active",
        }
    ]
    assert [(r.memory, r.relation, r.score) for r in same.related] == [(leila, DUPLICATE, 1.0)]


# The judgements an owner saw go wrong when "related" meant "close".


@pytest.mark.django_db
def test_another_persons_fact_is_never_an_update(alice):
    brother = make_memory(alice, "My brother lives in Porto.")
    ana = make_memory(alice, "Ana lives in Lisbon.", entities=["Ana"])
    mine = make_memory(alice, "Lives in Lisbon.")

    moved = find_related(alice, "Lives in Porto now.")
    about_ana = find_related(alice, "Ana lives in Lisbon with her sister.", entities=["Ana"])

    assert [(r.memory, r.relation) for r in moved.related if r.relation != SEE_ALSO] == [
        (mine, UPDATE)
    ]
    assert brother not in [r.memory for r in moved.related if r.relation != SEE_ALSO]
    assert mine not in [r.memory for r in about_ana.related if r.relation != SEE_ALSO]
    assert ana in [r.memory for r in about_ana.related]


@pytest.mark.django_db
def test_another_occasion_of_an_event_is_not_an_update(alice):
    rome = make_memory(alice, "Flew to Rome for Ana's wedding in May 2019.", "episodic")
    found = find_related(alice, "Flying to Rome in May 2027.", type="episodic")
    assert rome not in [r.memory for r in found.related if r.relation != SEE_ALSO]
    corrected = find_related(
        alice, "Flew to Rome for Ana's wedding in May 2019, not April.", type="episodic"
    )
    assert [(r.memory, r.relation) for r in corrected.related] == [(rome, UPDATE)]


@pytest.mark.django_db
def test_it_includes_pending_proposals_only_when_asked(alice):
    proposal = Memory.propose(alice, "Has a dog named Biscuit.", Memory.Type.SEMANTIC)
    assert find_related(alice, "Has a dog named Biscuit.").related == []
    found = find_related(alice, "Has a dog named Biscuit.", include_proposals=True)
    assert [(r.memory, r.relation) for r in found.related] == [(proposal, DUPLICATE)]


@pytest.mark.django_db
def test_it_finds_related_memories_for_a_whole_queue_page(alice):
    aisle = make_memory(alice, "Prefers an aisle seat.", "preference")
    window = Memory.propose(alice, "Prefers a window seat.", Memory.Type.PREFERENCE)
    peanuts = Memory.propose(alice, "Is allergic to peanuts.", Memory.Type.SEMANTIC)

    results = related_for_memories(alice, [window, peanuts])

    assert [(r.memory, r.relation) for r in results[window.pk].related] == [(aisle, UPDATE)]
    assert results[peanuts.pk].related == []
    assert results[window.pk].degraded == NO_PROVIDER


@pytest.mark.django_db
def test_it_finds_nothing_for_an_unrelated_fact(alice):
    make_memory(alice, "Prefers an aisle seat on long flights.")
    assert find_related(alice, "Is allergic to peanuts.").related == []


@pytest.mark.django_db
def test_it_uses_stored_vectors_when_words_differ(alice, openai_embeddings):
    bikes = make_memory(alice, "Bikes to the office.")
    near = [1.0] + [0.0] * 383
    openai_embeddings.vectors["Bikes to the office."] = near
    openai_embeddings.vectors["Cycles to work."] = [0.99, 0.141] + [0.0] * 382
    Memory.objects.filter(pk=bikes.pk).update(embedding=near)

    found = find_related(alice, "Cycles to work.")

    assert found.degraded == ""
    assert found.embedding is not None
    assert [(r.memory, r.relation) for r in found.related] == [(bikes, DUPLICATE)]
    assert found.related[0].score == pytest.approx(0.99, abs=0.001)


@pytest.mark.django_db
def test_it_falls_back_to_words_when_embedding_fails(alice, openai_embeddings, settings):
    settings.EMBEDDING_MAX_RETRIES = 0
    aisle = make_memory(alice, "Prefers an aisle seat.")
    openai_embeddings.queue(EMBEDDINGS, Answer(status=500, json={"error": "down"}))

    found = find_related(alice, "Prefers a window seat.")

    assert found.degraded == related.EMBEDDING_FAILED
    assert [r.memory for r in found.related] == [aisle]


@pytest.mark.django_db
def test_it_answers_empty_when_the_search_fails(alice, monkeypatch):
    make_memory(alice, "Prefers an aisle seat.")

    def broken(*args, **kwargs):
        raise DatabaseError("the database went away")

    monkeypatch.setattr(related, "_candidates", broken)
    found = find_related(alice, "Prefers a window seat.")
    assert found.related == [] and found.degraded == related.QUERY_FAILED


def same_word(first: str, second: str) -> bool:
    """The rule word by word: equal, or one the other's stem of four letters or more."""
    shorter, longer = sorted((first, second), key=len)
    return first == second or len(shorter) >= 4 and longer.startswith(shorter)


# Short words over few letters, so that stems, equal words and near misses all occur.
stem_words = st.text(alphabet="abcé'", min_size=1, max_size=7)


@settings(max_examples=400, deadline=None)
@given(st.sets(stem_words, max_size=12), st.sets(stem_words, max_size=12))
def test_unmatched_words_are_those_no_word_of_the_other_side_matches(words, others):
    expected = {word for word in words if not any(same_word(word, other) for other in others)}
    assert _unmatched(words, others) == expected
    assert _meet(words, others) == any(same_word(w, o) for w in words for o in others)


def test_a_stem_of_four_letters_matches_and_a_shorter_one_does_not():
    assert _unmatched({"allerg", "cat", "toronto's"}, {"allergi", "cats", "toronto"}) == {"cat"}


@pytest.mark.django_db
@pytest.mark.parametrize("dominant", [False, True], ids=["exact scan", "through the graph"])
def test_an_owner_who_dominates_the_table_gets_candidates_from_the_graph(
    alice, bob, openai_embeddings, monkeypatch, settings, dominant
):
    # A busy machine's round trip or statement must not send the check to its
    # fallback: none of this tests slowness.
    settings.EMBEDDING_TIMEOUT = 60.0
    monkeypatch.setattr(related, "EMBED_TIMEOUT_SECONDS", 60.0)
    monkeypatch.setattr(related, "QUERY_TIMEOUT_SECONDS", 60.0)
    # Bob's memories lie right on the text; Alice's own near one must be found.
    Memory.objects.bulk_create(
        Memory(
            owner=bob,
            content=f"Bob's note {index}.",
            type="semantic",
            status=Memory.Status.ACTIVE,
            embedding=[1.0, 0.001 * index] + [0.0] * 382,
        )
        for index in range(200)
    )
    bikes = make_memory(alice, "Bikes to the office.", embedding=[0.99, 0.0, 0.141] + [0.0] * 381)
    # Her other memories lie near the text too, so a walk meets hers first
    # whatever else the shared graph holds (rows other tests rolled back).
    for index in range(12):
        make_memory(
            alice,
            f"Waters plant {index}.",
            embedding=[0.7] + [0.0] * (10 + index) + [0.714] + [0.0] * (372 - index),
        )
    openai_embeddings.vectors["Cycles to work."] = [1.0] + [0.0] * 383
    # Not through ANALYZE and the owner's share: the planner's statistics it
    # writes outlive the test's transaction, and other tests read them.
    monkeypatch.setattr(legs, "_owner_dominates", lambda *args, **kwargs: dominant)
    walks = []
    approximate = legs._approximate_nearest
    monkeypatch.setattr(
        legs, "_approximate_nearest", lambda *args: walks.append(1) or approximate(*args)
    )

    found = find_related(alice, "Cycles to work.")

    assert found.degraded == ""
    assert [r.memory for r in found.related][:1] == [bikes]
    assert all(r.memory.owner_id == alice.pk for r in found.related)
    assert len(walks) == (1 if dominant else 0)


@pytest.mark.parametrize(
    ("old", "new", "replaced"),
    [
        (
            "Arjun's wedding in Bangalore is on 18 January 2027.",
            "Arjun's wedding is in Mysore, on 18 January 2027.",
            True,
        ),
        (
            "Finn's party is at Funky Monkeys on 21 February.",
            "Finn's party is at Jump Nation in Sale.",
            True,
        ),
        # One place named two ways, a place only one side names, a month.
        (
            "The choir sang at Tampere Hall on 4 October.",
            "Performed with her choir in Tampere-talo in October.",
            False,
        ),
        (
            "Skied the Finlandia 50 km on 15.2.2025.",
            "Completed the Finlandia ski race at Lahti in February 2025.",
            False,
        ),
        ("Saw Take That in May 2024.", "Saw Take That in June 2024.", False),
    ],
)
def test_it_tells_a_place_replaced_from_one_place_named_twice(old, new, replaced):
    assert place_replaced(old, new) is replaced
