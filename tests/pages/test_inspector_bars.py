import pytest

from memories.inspector import score_bars
from memories.models import Memory
from retrieval.constants import SEED_PROFILE
from retrieval.fusion import rrf_score
from retrieval.results import ScoredMemory


def scored(parts: dict) -> ScoredMemory:
    memory = Memory(pk=1, content="x", type="semantic")
    return ScoredMemory(memory=memory, score=parts.get("final", 0.0), parts=parts)


def test_it_stacks_one_segment_per_leg_for_fusion():
    both = scored(
        {
            "ranks": {"text": 1, "entity": 1},
            "contributions": {"text": 1.5, "entity": 0.5},
            "relevance": 2.0,
            "decay": 1.0,
            "current_state": 0.5,
            "weight": 1.0,
            "final": 1.0,
        }
    )
    one = scored(
        {
            "ranks": {"vector": 3},
            "contributions": {"vector": 0.5},
            "relevance": 0.5,
            "decay": 1.0,
            "weight": 1.0,
            "final": 0.5,
        }
    )
    first, second = score_bars("fusion", [both, one])

    relevance, age, weight, final = first.bars
    assert [label for label, _, _ in relevance.segments] == ["bar-text", "bar-entity"]
    assert sum(width for _, width, _ in relevance.segments) == pytest.approx(100.0, abs=0.01)
    assert "text rank 1" in relevance.segments[0][2]
    assert age.segments[0][1] == 50.0
    assert (weight.value, final.value) == ("1.00", "1.0000")
    assert final.segments[0][1] == 100.0
    assert second.bars[0].segments[0][0] == "bar-vector"
    assert second.bars[0].segments[0][1] == 25.0


def test_it_shows_reciprocal_ranks_under_the_seed_profile():
    rrf = rrf_score({"vector": 1}, SEED_PROFILE)
    item = scored(
        {"ranks": {"vector": 1}, "rrf": rrf, "relevance": rrf, "decay": 0.5, "weight": 0.8,
         "final": rrf * 0.4}
    )  # fmt: skip
    (candidate,) = score_bars("fusion", [item], "seed")
    relevance, age, weight, _ = candidate.bars
    assert relevance.segments[0][1] == 100.0
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
    assert bm25.segments[0][1] == 100.0
    assert cosine.value == "—"
    assert freshness.segments[0][1] == 25.0
    assert [width for _, width, _ in final.segments] == [70.0, 15.0]
    assert final.value == "0.850"


def test_it_copes_with_no_candidates():
    assert score_bars("fusion", []) == []
