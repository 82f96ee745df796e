import pytest

from memories.inspector import score_bars
from memories.models import Memory
from retrieval.fusion import rrf_score
from retrieval.results import ScoredMemory


def scored(parts: dict) -> ScoredMemory:
    memory = Memory(pk=1, content="x", type="semantic")
    return ScoredMemory(memory=memory, score=parts.get("final", 0.0), parts=parts)


def test_it_stacks_one_segment_per_leg_for_fusion():
    both_rrf = rrf_score({"text": 1, "entity": 1})
    both = scored(
        {
            "ranks": {"text": 1, "entity": 1},
            "rrf": both_rrf,
            "decay": 0.5,
            "weight": 1.0,
            "final": both_rrf / 2,
        }
    )
    one_rrf = rrf_score({"vector": 3})
    one = scored(
        {
            "ranks": {"vector": 3},
            "rrf": one_rrf,
            "decay": 1.0,
            "weight": 0.8,
            "final": one_rrf * 0.8,
        }
    )
    first, second = score_bars("fusion", [both, one])

    rrf, decay, weight, final = first.bars
    assert [label for label, _, _ in rrf.segments] == ["bar-text", "bar-entity"]
    assert sum(width for _, width, _ in rrf.segments) == pytest.approx(100.0, abs=0.01)
    assert "text rank 1" in rrf.segments[0][2]
    assert decay.segments[0][1] == 50.0
    assert (weight.value, final.value) == ("1.00", f"{both_rrf / 2:.5f}")
    assert final.segments[0][1] == 100.0
    assert second.bars[0].segments[0][0] == "bar-vector"
    assert second.bars[2].segments[0][1] == 80.0


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
