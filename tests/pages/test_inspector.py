"""memories/inspector.py: the score bars, the plain sentence, the steps and the legend."""

from datetime import UTC, datetime, timedelta

import pytest

from memories.inspector import Evidence, legend, score_bars, sentence
from memories.inspector import _freshness_steps as freshness_steps
from memories.inspector import _fusion_steps as fusion_steps
from memories.models import Memory
from retrieval import constants
from retrieval.constants import DEFAULT_PROFILE, SEED_PROFILE
from retrieval.fusion import fuse, rrf_score
from retrieval.results import ScoredMemory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def scored(parts: dict, *, type="semantic", age_days=0, **item) -> ScoredMemory:
    created = NOW - timedelta(days=age_days)
    memory = Memory(pk=1, content="x", type=type, created_at=created, last_confirmed_at=created)
    return ScoredMemory(memory=memory, score=parts.get("final", 0.0), parts=parts, **item)


def fusion_parts(ranks: dict, decay: float = 1.0, weight: float = 1.0) -> dict:
    """Score parts as the seed profile reports them (reciprocal ranks, decay, type weight)."""
    rrf = rrf_score(ranks, SEED_PROFILE)
    return {
        "ranks": ranks,
        "rrf": rrf,
        "relevance": rrf,
        "decay": decay,
        "weight": weight,
        "final": rrf * decay * weight,
    }


def default_parts(contributions: dict, ranks: dict, **extra) -> dict:
    """Score parts as the default profile reports them."""
    relevance = sum(contributions.values())
    final = relevance * extra.get("current_state", 1.0)
    return {
        "ranks": ranks,
        "z": {leg: value for leg, value in contributions.items() if leg != "entity"},
        "contributions": contributions,
        "gate": 1.0,
        "relevance": relevance,
        "decay": 1.0,
        "weight": 1.0,
        **extra,
        "final": final,
    }


def test_it_stacks_one_segment_per_leg_for_fusion():
    both = scored(default_parts({"text": 1.5, "entity": 0.5}, {"text": 1, "entity": 1}))
    one = scored(default_parts({"vector": 1.0}, {"vector": 3}, current_state=0.5))
    first, second = score_bars("fusion", [both, one])

    relevance, age, weight, final = first.bars
    assert [segment.css for segment in relevance.segments] == ["bar-text", "bar-entity"]
    assert sum(segment.width for segment in relevance.segments) == pytest.approx(100.0, abs=0.01)
    # Laid end to end.
    assert relevance.segments[1].x == pytest.approx(relevance.segments[0].width)
    assert "text rank 1" in relevance.segments[0].title
    assert age.segments[0].width == 100.0
    assert (weight.value, final.value) == ("1.00", "2.0000")
    assert final.segments[0].width == 100.0
    assert second.bars[0].segments[0].css == "bar-vector"
    assert second.bars[0].segments[0].width == 50.0
    assert second.bars[1].segments[0].width == 50.0


def test_it_shows_reciprocal_ranks_under_the_seed_profile():
    item = scored(fusion_parts({"text": 1, "entity": 1}, decay=0.5, weight=0.8))
    (candidate,) = score_bars("fusion", [item], "seed")
    relevance, age, weight, _ = candidate.bars
    assert sum(segment.width for segment in relevance.segments) == pytest.approx(100.0, abs=0.01)
    assert (age.value, weight.value) == ("0.500", "0.80")


def test_it_blends_relevance_and_freshness_for_the_freshness_pipeline():
    item = scored(
        {
            "bm25": 2.0,
            "cosine": None,
            "relevance": 2.0,
            "freshness": 0.25,
            "relevance_norm": 1.0,
            "freshness_norm": 0.5,
            "final": 0.85,
        }
    )
    (candidate,) = score_bars("freshness", [item])
    bm25, cosine, freshness, final = candidate.bars
    assert bm25.segments[0].width == 100.0
    assert cosine.value == "—"
    assert freshness.segments[0].width == 25.0
    assert [segment.width for segment in final.segments] == [70.0, 15.0]
    assert final.segments[1].x == 70.0
    assert final.value == "0.850"


def test_it_copes_with_no_candidates():
    assert score_bars("fusion", []) == []


def test_it_says_in_one_sentence_how_a_memory_was_found_how_old_it_is_and_where_it_went():
    item = scored(fusion_parts({"vector": 2, "text": 1}, decay=0.79), age_days=95, position=1)
    text = sentence("fusion", item, Evidence(words=["coffee"]), NOW, packed=5)
    assert text == (
        "Found by meaning and by the word <em><bdi>coffee</bdi></em>; "
        "3\xa0months old (counts 79%); in the block at position 2 of 5."
    )
    fresh = scored(default_parts({"vector": 1.0}, {"vector": 1}), age_days=95, position=0)
    assert "3\xa0months old (its age does not lower it)" in sentence(
        "fusion", fresh, Evidence(), NOW, packed=1
    )


def test_it_says_when_the_question_asked_how_things_stand_now():
    old = scored(
        default_parts(
            {"vector": 2.0},
            {"vector": 1},
            current_state=0.5,
            superseded_by_newer=7,
            superseded_about={"subject": "self", "kind": "self", "aspect": "commute"},
        ),
        age_days=700,
    )
    text = sentence("fusion", old, Evidence(), NOW, packed=1)
    assert "(a newer memory about your commute, #7, replaces it for now)" in text
    brother = scored(
        default_parts(
            {"vector": 2.0},
            {"vector": 1},
            superseded_by_newer=8,
            superseded_about={"subject": "brother", "kind": "person", "aspect": "home"},
        ),
        age_days=700,
    )
    assert "a newer memory about your brother · home, #8, replaces it for now" in sentence(
        "fusion", brother, Evidence(), NOW, packed=1
    )
    steps = fusion_steps(old, DEFAULT_PROFILE)
    assert any("a newer memory about your commute, #7, replaces it for now" in s for s in steps)
    assert any("asked how things stand now" in step for step in steps)


def test_it_says_a_memory_was_found_as_the_later_one_about_what_was_matched():
    parts = {"ranks": {}, "relevance": 1.5, "decay": 1.0, "weight": 1.0, "final": 1.2}
    parts.update(successor_of=9, successor_likeness=0.377, current_state=0.8)
    item = scored(parts, age_days=30, position=0)
    item.memory.about_subject = item.memory.about_kind = "self"
    item.memory.about_aspect = "manager"
    text = sentence("fusion", item, Evidence(), NOW, packed=3)
    assert text.startswith("Found as a later memory about your manager than #9; ")
    steps = fusion_steps(item, DEFAULT_PROFILE)
    assert (
        "found as a later memory about your manager than #9:"
        " #9's relevance × likeness 0.38 → 1.50" in steps
    )
    # Found by a leg as well: both are said.
    parts = default_parts({"vector": 0.4}, {"vector": 6}, successor_of=9, successor_likeness=0.4)
    both = scored(parts, age_days=30, position=0)
    both.memory.about_subject = both.memory.about_kind = "self"
    both.memory.about_aspect = "manager"
    assert sentence("fusion", both, Evidence(), NOW, packed=3).startswith(
        "Found by meaning and as a later memory about your manager than #9; "
    )


def test_it_shows_what_a_memory_about_the_asked_aspect_gained():
    parts = default_parts({"vector": 2.0}, {"vector": 1}, current_state=0.5)
    parts.update(asked_aspect="home", asked_factor=1.25, final=parts["final"] * 1.25)
    steps = fusion_steps(scored(parts, age_days=30), DEFAULT_PROFILE)
    assert "about what was asked (home) → × 1.25" in steps
    assert steps[-1] == "2.000 × age 0.50 × type 1 × asked 1.25 = 1.2500"


def test_it_says_why_a_candidate_far_below_the_best_was_left_out():
    item = scored(default_parts({"vector": 0.1}, {"vector": 9}), cut_reason="below_relative_cut")
    text = sentence("fusion", item, Evidence(), NOW, packed=1)
    assert text.endswith("left out: far below the best match.")


def test_it_says_a_candidate_was_left_out_where_the_scores_fall_off():
    item = scored(default_parts({"vector": 0.4}, {"vector": 3}), cut_reason="past_falloff")
    text = sentence("fusion", item, Evidence(), NOW, packed=1)
    assert text.endswith("left out: the block ends where the scores fall off.")


def test_it_names_several_words_and_names_and_says_why_a_memory_was_left_out():
    item = scored(
        fusion_parts({"text": 4, "entity": 1}),
        type="episodic",
        age_days=400,
        cut_reason="over_budget",
    )
    found = Evidence(words=["Lisbon", "trip", "March"], names=["Lisbon"])
    text = sentence("fusion", item, found, NOW, packed=3)
    # The name is said once, as a name.
    assert text.startswith(
        "Found by the words <em><bdi>trip</bdi></em> and <em><bdi>March</bdi></em>, "
        "and by the name <em><bdi>Lisbon</bdi></em>;"
    )
    assert "1\xa0year old (its age does not lower it)" in text
    assert text.endswith("left out: no room left in the token budget.")


def test_it_escapes_the_words_of_the_message():
    item = scored(fusion_parts({"text": 1}))
    text = sentence("fusion", item, Evidence(words=["<script>"]), NOW, packed=1)
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_it_says_re_confirmed_when_the_age_counts_from_a_later_confirmation():
    item = scored(fusion_parts({"vector": 1}), age_days=300)
    item.memory.last_confirmed_at = NOW - timedelta(days=2)
    assert "re-confirmed 2\xa0days ago" in sentence("fusion", item, Evidence(), NOW, packed=1)


def test_it_explains_a_freshness_result():
    item = scored(
        {
            "bm25": 3.2,
            "cosine": 0.61,
            "relevance": 0.61,
            "freshness": 0.5,
            "relevance_norm": 1.0,
            "freshness_norm": 0.2,
            "final": 0.76,
        },
        age_days=7,
        position=0,
    )
    text = sentence("freshness", item, Evidence(words=["seat"]), NOW, packed=1)
    assert text.startswith("Found by the word <em><bdi>seat</bdi></em>, then ranked by meaning;")
    assert "(freshness 50%)" in text
    steps = freshness_steps(item)
    assert "similarity to the message 0.61" in steps
    assert any(step.startswith("freshness 0.50 (half-life") for step in steps)
    assert steps[-1] == (
        f"{constants.RELEVANCE_WEIGHT:g} × relevance 1.00 + "
        f"{constants.FRESHNESS_WEIGHT:g} × freshness 0.20 = 0.760"
    )


def test_it_shows_each_legs_share_with_the_constants_in_force():
    item = scored(fusion_parts({"vector": 3, "text": 1}, decay=0.5))
    steps = fusion_steps(item, SEED_PROFILE)
    k, weights = SEED_PROFILE.rrf_k, SEED_PROFILE.leg_weights
    assert steps[0] == (
        f"vector leg: rank 3 → {weights['vector']:g} ÷ ({k:g} + 3)"
        f" = {weights['vector'] / (k + 3):.3f}"
    )
    assert steps[1] == (
        f"text leg: rank 1 → {weights['text']:g} ÷ ({k:g} + 1) = {weights['text'] / (k + 1):.3f}"
    )
    assert steps[2].endswith(f"= {item.parts['final']:.4f}")


def test_it_shows_how_far_each_leg_stands_out_under_the_default_profile():
    parts = default_parts(
        {"vector": 1.2, "text": 0.9, "entity": 0.5}, {"vector": 2, "text": 1, "entity": 1}
    )
    parts["z"]["text"] = 1.8
    parts["gate"] = 0.5
    steps = fusion_steps(scored(parts), DEFAULT_PROFILE)
    assert steps[:3] == [
        "vector leg: rank 2, stands out by 1.20 → 1.20",
        "text leg: rank 1, stands out by 1.80 × meaning gate 0.50 → 0.90",
        "entity leg: rank 1 → + 0.50",
    ]


def test_it_degrades_gracefully_on_parts_it_does_not_know():
    parts = fusion_parts({"vector": 1, "graph": 2})
    parts["rrf"] += 0.25  # scored by rules the constants do not describe
    parts["recency_boost"] = 1.25
    item = scored(parts)
    steps = fusion_steps(item, SEED_PROFILE)
    assert steps[:2] == ["vector leg: rank 1", "graph leg: rank 2"]
    assert steps[-1] == "recency boost: 1.25"
    text = sentence("fusion", item, Evidence(), NOW, packed=1)
    assert text.startswith("Found by meaning and by the graph search;")
    bare = scored({"score_from_elsewhere": 0.3})
    assert sentence("fusion", bare, Evidence(), NOW, packed=1).startswith("Found; new;")
    assert fusion_steps(bare, SEED_PROFILE) == ["score from elsewhere: 0.3"]


def test_it_writes_the_legend_from_the_constants(monkeypatch):
    seed = {entry.term: entry for entry in legend("fusion", "seed")}
    assert seed["Score"].text == (
        f"k = {SEED_PROFILE.rrf_k:g}; leg weights: vector 1, text 1, entity 1."
    )
    assert f"A score of {SEED_PROFILE.min_score:g} or below is left out." == seed["Cut"].text
    assert f"Halves every {SEED_PROFILE.decay_half_life_days:g} days" in seed["Age"].text

    monkeypatch.setattr("memories.inspector.SUPERSEDED_FACTOR", 0.25)
    monkeypatch.setattr("memories.inspector.SUCCESSOR_MIN_SIMILARITY", 0.35)
    default = {entry.term: entry for entry in legend("fusion", "default")}
    low, high = DEFAULT_PROFILE.semantic_gate
    assert "× 0.25" in default["Age"].text
    assert "at least 0.35 alike it, joins even if no search found it" in default["Age"].text
    assert f"clip((similarity − {low:g}) ÷ {high - low:g}, 0, 1)" == default["Meaning gate"].formula
    assert f"{DEFAULT_PROFILE.relative_cut:.0%} of the best" in default["Cut"].text
    assert (
        f"where the scores fall off, under {DEFAULT_PROFILE.block_falloff:.0%} of the best, "
        f"and holds at most {DEFAULT_PROFILE.block_max_memories} memories"
    ) in default["Cut"].text
    assert "1/(60" not in " ".join(e.text + e.formula for e in legend("fusion", "default"))

    freshness = " ".join(entry.term + entry.text + entry.formula for entry in legend("freshness"))
    assert "1. BM25" in freshness and "2. Rerank" in freshness and "3. Blend" in freshness
    assert f"The {constants.BM25_TOP} memories" in freshness
    assert f"the {constants.RERANK_TOP} closest" in freshness


def test_it_shows_what_fusion_did_to_a_replaced_memory_not_a_constant_of_its_own():
    """The older fact drops below the newer one that replaces it: by more than
    SUPERSEDED_FACTOR when the newer one scores lower. The inspector shows the
    factor fusion recorded."""
    old = Memory(pk=1, content="Lives in Lisbon.", type="semantic", created_at=NOW)
    new = Memory(pk=2, content="Moved to Porto.", type="semantic", created_at=NOW)
    old.created_at = NOW - timedelta(days=400)
    kept, _ = fuse(
        {"vector": [(1, 0.9), (2, 0.3)]},
        {1: old, 2: new},
        NOW,
        profile=DEFAULT_PROFILE,
        query="Where do I live now?",
        query_embedding=[1.0, 0.0],
        vectors={1: [1.0, 0.0], 2: [0.9, 0.436]},
    )
    replaced = next(item for item in kept if item.memory.pk == 1)
    factor = replaced.parts["superseded_factor"]
    assert factor < constants.SUPERSEDED_FACTOR
    assert f"replaces it for now → below it, × {factor:.2f}" in "\n".join(
        fusion_steps(replaced, DEFAULT_PROFILE)
    )
    (candidate,) = score_bars("fusion", [replaced])
    age = next(bar for bar in candidate.bars if bar.label == "× age")
    assert age.value == f"{replaced.parts['age']:.3f}"
