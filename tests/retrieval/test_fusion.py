from datetime import UTC, datetime, timedelta

import pytest

from memories.models import Memory
from retrieval.constants import LEG_WEIGHTS, MIN_SCORE, RRF_K
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
    assert rrf_score(ranks[8]) == pytest.approx(1 / (RRF_K + 2) + LEG_WEIGHTS["text"] / (RRF_K + 1))
    assert rrf_score(ranks[7]) == pytest.approx(1 / (RRF_K + 1))


def test_it_weights_each_leg():
    ranks = {"vector": 1, "text": 1}
    assert rrf_score(ranks, k=2, weights={"vector": 1.0, "text": 1.5}) == pytest.approx(
        1 / 3 + 1.5 / 3
    )
    # The documented defaults: the text leg counts most, the others alike.
    assert LEG_WEIGHTS == {"vector": 1.0, "text": 1.5, "entity": 1.0}


def test_it_halves_the_score_at_ninety_days():
    assert decay(memory(1, confirmed_days=0), AS_OF) == pytest.approx(1.0)
    assert decay(memory(1, days=400, confirmed_days=90), AS_OF) == pytest.approx(0.5)
    assert decay(memory(1, days=400, confirmed_days=180), AS_OF) == pytest.approx(0.25)


def test_it_decays_never_confirmed_memories_from_creation():
    assert decay(memory(1, days=90), AS_OF) == pytest.approx(0.5)


def test_it_does_not_decay_records_of_events():
    # An event stays true however old it is; facts and the rest go stale.
    assert decay(memory(1, "episodic", days=400), AS_OF) == 1.0
    assert decay(memory(1, "preference", days=90), AS_OF) == pytest.approx(0.5)
    assert decay(memory(1, "reflection", days=90), AS_OF) == pytest.approx(0.5)


def test_it_ignores_a_confirmation_after_as_of():
    late = memory(1, days=90, confirmed_days=-5)
    assert reference_time(late, AS_OF) == late.created_at
    assert decay(late, AS_OF) == pytest.approx(0.5)


def test_it_multiplies_rrf_decay_and_type_weight():
    reflection = memory(1, "reflection", days=45)
    kept, cut = fuse({"text": [1]}, {1: reflection}, AS_OF)
    assert cut == []
    [item] = kept
    text_rank_1 = LEG_WEIGHTS["text"] / (RRF_K + 1)
    assert item.parts["rrf"] == pytest.approx(text_rank_1)
    assert item.parts["decay"] == pytest.approx(0.5**0.5)
    assert item.parts["weight"] == 0.8
    assert item.score == pytest.approx(text_rank_1 * 0.5**0.5 * 0.8)
    assert item.parts["final"] == item.score
    assert item.parts["ranks"] == {"text": 1}


def test_it_ranks_two_legs_above_one_at_the_same_rank():
    kept, _ = fuse({"vector": [1, 2], "text": [2]}, {1: memory(1), 2: memory(2)}, AS_OF)
    assert [item.memory.pk for item in kept] == [2, 1]


def test_it_weights_types():
    kept, _ = fuse(
        {"vector": [1], "entity": [2]},
        {1: memory(1, "episodic"), 2: memory(2, "preference")},
        AS_OF,
    )
    # Same rank, same age: the preference (1.0) beats the event (0.9).
    assert [item.memory.pk for item in kept] == [2, 1]
    assert kept[1].score == pytest.approx(kept[0].score * 0.9)


def test_it_cuts_below_the_minimum_score():
    # The vector leg's 30th candidate scores 1/32 fresh; the minimum (0.005 × 90/32
    # ≈ 0.0141) cuts it once decayed below 0.45: after 90 days (0.5) it stays,
    # after 120 days (0.397) it goes — as under the seed's k = 60 and 0.005.
    assert round(MIN_SCORE, 6) == round(0.005 * 90 / 32, 6)
    filler = list(range(100, 128))
    kept, cut = fuse(
        {"vector": [*filler, 1, 2]},
        {1: memory(1, days=90), 2: memory(2, days=120)},
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
    kept, _ = fuse({"vector": [5], "entity": [4]}, {4: memory(4), 5: memory(5)}, AS_OF)
    assert [item.memory.pk for item in kept] == [4, 5]
