"""memories/inspector.py: the score bars, the plain sentence, the steps and the legend."""

from datetime import UTC, datetime, timedelta

import pytest

from memories.inspector import Evidence, legend, score_bars, sentence
from memories.inspector import _freshness_steps as freshness_steps
from memories.inspector import _fusion_steps as fusion_steps
from memories.models import Memory
from retrieval import constants
from retrieval.fusion import rrf_score
from retrieval.results import ScoredMemory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def scored(parts: dict, *, type="semantic", age_days=0, **item) -> ScoredMemory:
    created = NOW - timedelta(days=age_days)
    memory = Memory(pk=1, content="x", type=type, created_at=created, last_confirmed_at=created)
    return ScoredMemory(memory=memory, score=parts.get("final", 0.0), parts=parts, **item)


def fusion_parts(ranks: dict, decay: float = 1.0, weight: float = 1.0) -> dict:
    rrf = rrf_score(ranks)
    return {
        "ranks": ranks,
        "rrf": rrf,
        "decay": decay,
        "weight": weight,
        "final": rrf * decay * weight,
    }


def test_it_stacks_one_segment_per_leg_for_fusion():
    both = scored(fusion_parts({"text": 1, "entity": 1}, decay=0.5))
    one = scored(fusion_parts({"vector": 3}, weight=0.8))
    first, second = score_bars("fusion", [both, one])

    rrf, decay, weight, final = first.bars
    assert [segment.css for segment in rrf.segments] == ["bar-text", "bar-entity"]
    assert sum(segment.width for segment in rrf.segments) == pytest.approx(100.0, abs=0.01)
    # Laid end to end.
    assert rrf.segments[1].x == pytest.approx(rrf.segments[0].width)
    assert "text rank 1" in rrf.segments[0].title
    assert decay.segments[0].width == 50.0
    assert (weight.value, final.value) == ("1.00", f"{both.parts['final']:.5f}")
    assert final.segments[0].width == 100.0
    assert second.bars[0].segments[0].css == "bar-vector"
    assert second.bars[2].segments[0].width == 80.0


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
    assert "1\xa0year old (events do not fade)" in text
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
    steps = fusion_steps(item)
    k, text_weight = constants.RRF_K, constants.LEG_WEIGHTS["text"]
    assert steps[0] == (
        f"vector leg: rank 3 → {constants.LEG_WEIGHTS['vector']:g} ÷ ({k:g} + 3)"
        f" = {constants.LEG_WEIGHTS['vector'] / (k + 3):.3f}"
    )
    assert (
        steps[1]
        == f"text leg: rank 1 → {text_weight:g} ÷ ({k:g} + 1) = {text_weight / (k + 1):.3f}"
    )
    assert steps[2].endswith(f"= {item.parts['final']:.4f}")


def test_it_degrades_gracefully_on_parts_it_does_not_know():
    parts = fusion_parts({"vector": 1, "graph": 2})
    parts["rrf"] += 0.25  # scored by rules the constants do not describe
    parts["recency_boost"] = 1.25
    item = scored(parts)
    steps = fusion_steps(item)
    assert steps[:2] == ["vector leg: rank 1", "graph leg: rank 2"]
    assert steps[-1] == "recency boost: 1.25"
    text = sentence("fusion", item, Evidence(), NOW, packed=1)
    assert text.startswith("Found by meaning and by the graph search;")
    bare = scored({"score_from_elsewhere": 0.3})
    assert sentence("fusion", bare, Evidence(), NOW, packed=1).startswith("Found; new;")
    assert fusion_steps(bare) == ["score from elsewhere: 0.3"]


def test_it_writes_the_legend_from_the_constants(monkeypatch):
    monkeypatch.setattr("memories.inspector.RRF_K", 7)
    monkeypatch.setattr(
        "memories.inspector.LEG_WEIGHTS", {"vector": 1.0, "text": 2.5, "entity": 1.0}
    )
    score = next(entry for entry in legend("fusion") if entry.term == "Score")
    assert score.text == "k = 7; leg weights: vector 1, text 2.5, entity 1."
    assert "1/(60" not in " ".join(entry.text + entry.formula for entry in legend("fusion"))
    cut = next(entry for entry in legend("fusion") if entry.term == "Cut")
    assert f"{constants.MIN_SCORE:.4f}" in cut.text
    freshness = " ".join(entry.term + entry.text + entry.formula for entry in legend("freshness"))
    assert "1. BM25" in freshness and "2. Rerank" in freshness and "3. Blend" in freshness
    assert f"The {constants.BM25_TOP} memories" in freshness
    assert f"the {constants.RERANK_TOP} closest" in freshness
