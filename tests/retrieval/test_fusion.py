from datetime import UTC, datetime, timedelta

import pytest

from memories.models import Memory
from retrieval.fusion import decay, fuse, reference_time, rrf_ranks, rrf_score

AS_OF = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def memory(pk: int, type: str = "semantic", *, days: float = 0.0, confirmed_days=None) -> Memory:
    created = AS_OF - timedelta(days=days)
    confirmed = None if confirmed_days is None else AS_OF - timedelta(days=confirmed_days)
    return Memory(
        pk=pk,
        owner_id=1,
        type=type,
        content=f"m{pk}",
        created_at=created,
        last_confirmed_at=confirmed,
    )


def test_it_sums_reciprocal_ranks_over_legs():
    ranks = rrf_ranks({"vector": [7, 8], "text": [8], "entity": []})
    assert ranks == {7: {"vector": 1}, 8: {"vector": 2, "text": 1}}
    assert rrf_score(ranks[8]) == pytest.approx(1 / 62 + 1 / 61)
    assert rrf_score(ranks[7]) == pytest.approx(1 / 61)


def test_it_halves_the_score_at_ninety_days():
    assert decay(memory(1, confirmed_days=0), AS_OF) == pytest.approx(1.0)
    assert decay(memory(1, days=400, confirmed_days=90), AS_OF) == pytest.approx(0.5)
    assert decay(memory(1, days=400, confirmed_days=180), AS_OF) == pytest.approx(0.25)


def test_it_decays_never_confirmed_memories_from_creation():
    assert decay(memory(1, days=90), AS_OF) == pytest.approx(0.5)


def test_it_ignores_a_confirmation_after_as_of():
    late = memory(1, days=90, confirmed_days=-5)
    assert reference_time(late, AS_OF) == late.created_at
    assert decay(late, AS_OF) == pytest.approx(0.5)


def test_it_multiplies_rrf_decay_and_type_weight():
    reflection = memory(1, "reflection", days=45)
    kept, cut = fuse({"text": [1]}, {1: reflection}, AS_OF)
    assert cut == []
    [item] = kept
    assert item.parts["rrf"] == pytest.approx(1 / 61)
    assert item.parts["decay"] == pytest.approx(0.5**0.5)
    assert item.parts["weight"] == 0.8
    assert item.score == pytest.approx(1 / 61 * 0.5**0.5 * 0.8)
    assert item.parts["final"] == item.score
    assert item.parts["ranks"] == {"text": 1}


def test_it_ranks_two_legs_above_one_at_the_same_rank():
    kept, _ = fuse({"vector": [1, 2], "text": [2]}, {1: memory(1), 2: memory(2)}, AS_OF)
    assert [item.memory.pk for item in kept] == [2, 1]


def test_it_weights_types():
    kept, _ = fuse(
        {"text": [1], "entity": [2]},
        {1: memory(1, "episodic"), 2: memory(2, "preference")},
        AS_OF,
    )
    # Same rank, same age: the preference (1.0) beats the event (0.9).
    assert [item.memory.pk for item in kept] == [2, 1]
    assert kept[1].score == pytest.approx(kept[0].score * 0.9)


def test_it_cuts_below_the_minimum_score():
    # 1/61 ≈ 0.0164: after two half-lives 0.0041 < 0.005; after one 0.0082 stays.
    kept, cut = fuse(
        {"text": [1, 2]},
        {1: memory(1, days=90), 2: memory(2, days=180)},
        AS_OF,
    )
    assert [item.memory.pk for item in kept] == [1]
    assert [item.memory.pk for item in cut] == [2]
    assert cut[0].cut_reason == "below_min_score"


def test_it_sorts_best_first_and_drops_unknown_ids():
    kept, _ = fuse(
        {"vector": [3, 1, 9], "text": [1]},
        {1: memory(1), 3: memory(3)},
        AS_OF,
    )
    assert [item.memory.pk for item in kept] == [1, 3]
    assert kept[0].score > kept[1].score


def test_it_breaks_ties_by_id():
    kept, _ = fuse({"vector": [5], "text": [4]}, {4: memory(4), 5: memory(5)}, AS_OF)
    assert [item.memory.pk for item in kept] == [4, 5]
