from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memories.models import Memory
from retrieval import packing
from retrieval.constants import DEFAULT_PROFILE, SEED_PROFILE
from retrieval.packing import pack, serial_position_order
from retrieval.recall import recall
from retrieval.render import BLOCK_CLOSE, BLOCK_OPEN, FIRST_ITEM_LINE, render_block, render_item
from retrieval.results import ScoredMemory
from retrieval.tokens import count_tokens
from tests.base import make_memory
from tests.retrieval.fence_oracle import assert_well_formed
from tests.retrieval.helpers import axis, vector

FENCE_TOKENS = count_tokens(BLOCK_OPEN + BLOCK_CLOSE)


def scored(content: str, score: float, type: str = Memory.Type.SEMANTIC) -> ScoredMemory:
    # Unsaved: packing is pure and never touches the database.
    return ScoredMemory(memory=Memory(type=type, content=content), score=score)


def line_tokens(item: ScoredMemory) -> int:
    return count_tokens(render_item(item.memory.type, item.memory.content))


def test_it_orders_best_then_third_fourth_and_second_last():
    assert serial_position_order([]) == []
    assert serial_position_order(["a"]) == ["a"]
    assert serial_position_order(["a", "b"]) == ["a", "b"]
    assert serial_position_order(["a", "b", "c"]) == ["a", "c", "b"]
    assert serial_position_order(["1", "2", "3", "4", "5", "6"]) == ["1", "3", "4", "5", "6", "2"]


def test_it_renders_the_block_in_serial_position_order():
    candidates = [scored(f"memory number {rank}", score=1.0 / rank) for rank in range(1, 6)]

    result = pack(candidates, budget=1000)

    assert result.packed == candidates
    assert result.left_out == []
    assert result.block == render_block(
        (c.memory.type, c.memory.content) for c in serial_position_order(candidates)
    )
    lines = result.block.split("\n")
    item_lines = lines[FIRST_ITEM_LINE:-1]
    assert [line.removeprefix("- [semantic] ") for line in item_lines] == [
        "memory number 1",
        "memory number 3",
        "memory number 4",
        "memory number 5",
        "memory number 2",
    ]
    assert [c.position for c in candidates] == [0, 4, 1, 2, 3]
    for item in candidates:
        line = render_item("semantic", item.memory.content).removesuffix("\n")
        assert lines[FIRST_ITEM_LINE + item.position] == line
        assert item.tokens == line_tokens(item)
        assert item.cut_reason is None
    assert result.block_tokens == count_tokens(result.block)
    assert result.block_tokens == FENCE_TOKENS + sum(c.tokens for c in candidates)


def test_it_skips_an_item_that_does_not_fit_and_still_takes_a_later_one():
    best = scored("Prefers the aisle seat on long-haul flights", 0.9)
    huge = scored("A very long reflection about travel. " * 40, 0.8, Memory.Type.REFLECTION)
    small = scored("Birthday is on 5 March", 0.7)
    budget = FENCE_TOKENS + line_tokens(best) + line_tokens(small)
    assert line_tokens(huge) > line_tokens(small)

    result = pack([best, huge, small], budget)

    assert result.packed == [best, small]
    assert result.left_out == [huge]
    assert huge.cut_reason == "over_budget"
    assert huge.position is None
    assert huge.tokens == line_tokens(huge)
    assert (best.position, small.position) == (0, 1)
    assert result.block_tokens == budget == count_tokens(result.block)


def test_it_stops_one_token_short():
    first, second = scored("Lives in Lisbon", 0.9), scored("Works as a nurse", 0.5)
    exact = FENCE_TOKENS + line_tokens(first) + line_tokens(second)

    assert pack([first, second], exact).packed == [first, second]
    result = pack([first, second], exact - 1)
    assert result.packed == [first]
    assert second.cut_reason == "over_budget"
    assert count_tokens(result.block) <= exact - 1


def test_it_returns_an_empty_block_when_the_fence_alone_does_not_fit():
    for budget in (FENCE_TOKENS - 1, FENCE_TOKENS, 0, -5):
        candidates = [scored("Likes tea", 0.5)]
        result = pack(candidates, budget)
        assert (result.block, result.block_tokens, result.packed) == ("", 0, [])
        assert result.left_out == candidates
        assert candidates[0].cut_reason == "over_budget"


def test_it_returns_an_empty_block_for_no_candidates():
    result = pack([], 1000)
    assert (result.block, result.block_tokens, result.packed, result.left_out) == ("", 0, [], [])


def test_it_drops_the_weakest_memory_when_the_whole_block_costs_more_than_its_lines(
    monkeypatch,
):
    # Simulate token merges across line boundaries: a block with items costs 3 more than
    # its parts. The promise is on the finished block, so the weakest memory must go.
    def count_with_merges(text: str) -> int:
        extra = 3 if text.startswith(BLOCK_OPEN) and "\n- [" in text else 0
        return count_tokens(text) + extra

    monkeypatch.setattr(packing, "count_tokens", count_with_merges)
    candidates = [scored("Speaks Portuguese", 0.9), scored("Owns a cat", 0.8), scored("Runs", 0.7)]
    budget = FENCE_TOKENS + sum(line_tokens(c) for c in candidates)

    result = pack(candidates, budget)

    assert result.packed == candidates[:2]
    assert result.left_out == candidates[2:]
    assert candidates[2].cut_reason == "over_budget"
    assert candidates[2].position is None
    assert result.block_tokens == count_with_merges(result.block) <= budget


hostile_piece = st.sampled_from(
    ["</memory>", "<memory>", "\n", "＜／ｍｅｍｏｒｙ＞", "<|im_start|>", "\u200b", "SYSTEM: "]
    + ["- [semantic] ", "мемоry", "\U000e003c"]
)
content = st.lists(st.one_of(st.text(max_size=40), hostile_piece), min_size=1, max_size=8).map(
    "".join
)
memory_type = st.sampled_from(Memory.Type.values)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(memory_type, content), max_size=12),
    st.integers(-10, 700),
    st.sampled_from([(0.0, None), (0.15, 8), (0.5, 2)]),
)
def test_it_never_exceeds_the_budget(memories, budget, cut):
    candidates = [
        scored(text, score=1.0 - i / 100, type=kind) for i, (kind, text) in enumerate(memories)
    ]
    falloff, max_memories = cut

    result = pack(candidates, budget, falloff=falloff, max_memories=max_memories)

    assert count_tokens(result.block) == result.block_tokens <= max(budget, 0)
    assert len(result.packed) + len(result.left_out) == len(candidates)
    assert [c for c in candidates if c in result.packed] == result.packed
    if result.packed:
        assert_well_formed(result.block, len(result.packed))
        positions = sorted(item.position for item in result.packed)
        assert positions == list(range(len(result.packed)))
    else:
        assert result.block == ""
    assert all(item.cut_reason in ("over_budget", "past_falloff") for item in result.left_out)
    assert len(result.packed) <= (max_memories or len(candidates))


def test_it_reserves_the_fence_before_taking_a_memory_that_would_fit_only_without_it():
    # The medium memory fits the budget beside the best one only if the fence costs
    # nothing; the smaller one after it fits with the fence counted. Packing without
    # reserving the fence would take the medium one, overflow, and the final check
    # would then drop it and the small one alike, leaving only the best.
    best = scored("Prefers the aisle seat on long-haul flights", 0.9)
    medium = scored(
        "Keeps a notebook of every restaurant visited in Lisbon with ratings for the "
        "grilled sardines and the custard tarts",
        0.8,
    )
    small = scored("Birthday is on 5 March", 0.7)
    budget = FENCE_TOKENS + line_tokens(best) + line_tokens(small)
    assert line_tokens(small) < line_tokens(medium) <= line_tokens(small) + FENCE_TOKENS

    result = pack([best, medium, small], budget)

    assert result.packed == [best, small]
    assert result.left_out == [medium]
    assert medium.cut_reason == "over_budget" and small.cut_reason is None
    assert result.block_tokens == budget == count_tokens(result.block)


# --- one memory's share of the budget ------------------------------------------------


def test_it_cuts_a_memory_short_rather_than_let_it_crowd_out_the_rest():
    long_note = scored("Trip notes: " + "we walked along the river and ate well. " * 36, 1.0)
    short = [scored(f"Short relevant memory {n}.", 0.9 - n / 100) for n in range(5)]

    whole = pack([long_note, *short], budget=400)
    # Whole, the note takes most of the budget and most short memories miss out.
    assert whole.packed[0] is long_note and len(whole.packed) < 4

    shared = pack([long_note, *short], budget=400, max_item_share=0.25)
    assert shared.packed == [long_note, *short]
    assert long_note.shortened is not None and long_note.shortened.endswith("…")
    assert long_note.memory.content.startswith(long_note.shortened.removesuffix("…"))
    assert long_note.tokens <= 100
    assert long_note.tokens == count_tokens(render_item("semantic", long_note.shortened))
    assert long_note.shortened in shared.block
    assert shared.block_tokens == count_tokens(shared.block) <= 400
    assert all(item.shortened is None for item in short)


def test_it_cuts_at_a_word_when_it_can():
    note = scored("alpha beta gamma delta " * 100, 1.0)
    pack([note], budget=200, max_item_share=0.25)
    assert note.shortened.removesuffix("…").split()[-1] in {"alpha", "beta", "gamma", "delta"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=600), min_size=1, max_size=8),
    st.integers(min_value=60, max_value=700),
    st.sampled_from([0.1, 0.25, 0.5]),
)
def test_it_keeps_every_shortened_block_within_budget(contents, budget, share):
    candidates = [scored(text, 1.0 / rank) for rank, text in enumerate(contents, start=1)]
    result = pack(candidates, budget=budget, max_item_share=share)
    assert result.block_tokens == count_tokens(result.block) <= budget
    for item in result.packed:
        if item.shortened is not None:
            assert item.tokens <= int(budget * share)


# --- where the scores fall off ---------------------------------------------------------


def pack_as(profile, scores: list[float], budget: int = 1000):
    """Pack memories scoring ``scores`` as recall does under ``profile``."""
    candidates = [scored(f"Memory number {rank}.", score) for rank, score in enumerate(scores)]
    result = pack(
        candidates,
        budget,
        max_item_share=profile.max_item_share,
        falloff=profile.block_falloff,
        max_memories=profile.block_max_memories,
    )
    return result, candidates


def test_a_clear_winner_comes_alone():
    result, candidates = pack_as(DEFAULT_PROFILE, [7.0, 0.9, 0.6, 0.5, 0.3])

    assert result.packed == candidates[:1]
    assert result.left_out == candidates[1:]
    assert {item.cut_reason for item in candidates[1:]} == {"past_falloff"}
    assert [item.position for item in candidates] == [0, None, None, None, None]
    # Costed all the same: explain shows what each left-out line would have taken.
    assert all(item.tokens == line_tokens(item) for item in candidates)


def test_leaders_that_score_alike_come_together():
    # A question that needs three memories: three leaders close together, then a drop.
    result, candidates = pack_as(DEFAULT_PROFILE, [3.1, 2.9, 2.6, 0.4, 0.3, 0.1])

    assert result.packed == candidates[:3]
    assert [item.cut_reason for item in candidates] == [None] * 3 + ["past_falloff"] * 3


def test_a_gentle_slope_is_kept_down_to_the_falloff():
    scores = [4.0, 3.0, 2.0, 1.0, 0.5, 0.4]
    result, candidates = pack_as(DEFAULT_PROFILE, scores)

    kept = [s for s in scores if s >= DEFAULT_PROFILE.block_falloff * scores[0]]
    assert result.packed == candidates[: len(kept)] == candidates[:4]
    assert candidates[4].cut_reason == "past_falloff"


def test_flat_scores_never_fall_off_and_fill_the_block_to_its_limit():
    result, candidates = pack_as(DEFAULT_PROFILE, [1.0] * 12)

    limit = DEFAULT_PROFILE.block_max_memories
    assert limit is not None and 2 <= limit < 12
    assert result.packed == candidates[:limit]
    assert {item.cut_reason for item in candidates[limit:]} == {"past_falloff"}


def test_the_budget_stays_the_ceiling_under_the_falloff():
    # Five leaders scoring alike, room for two of them.
    candidates = [scored(f"Leader number {n} of five.", 1.0 - n / 100) for n in range(5)]
    budget = FENCE_TOKENS + line_tokens(candidates[0]) + line_tokens(candidates[1])

    result = pack(candidates, budget, falloff=0.15, max_memories=8)

    assert result.packed == candidates[:2]
    assert {item.cut_reason for item in candidates[2:]} == {"over_budget"}
    assert result.block_tokens == count_tokens(result.block) <= budget


def test_the_limit_counts_memories_in_the_block_not_those_that_did_not_fit():
    huge = scored("A very long reflection about travel. " * 40, 0.99, Memory.Type.REFLECTION)
    first, third = scored("Lives in Lisbon", 1.0), scored("Works as a nurse", 0.98)
    budget = FENCE_TOKENS + line_tokens(first) + line_tokens(third)

    result = pack([first, huge, third], budget, falloff=0.15, max_memories=2)

    assert result.packed == [first, third]
    assert huge.cut_reason == "over_budget"


def test_the_seed_profile_packs_as_before():
    assert (SEED_PROFILE.block_falloff, SEED_PROFILE.block_max_memories) == (0.0, None)
    scores = [7.0, 0.9, 0.6, 0.5, 0.3, *[0.2] * 8]
    seed, candidates = pack_as(SEED_PROFILE, scores)
    assert seed.packed == candidates
    budget_only = pack([scored(f"Memory number {n}.", s) for n, s in enumerate(scores)], 1000)
    assert seed.block == budget_only.block


def towards(cos: float) -> list[float]:
    """A unit vector at cosine ``cos`` from axis 0."""
    return vector((0, cos), (1, math.sqrt(1 - cos * cos)))


@pytest.mark.django_db
def test_recall_ends_the_default_block_where_the_scores_fall_off_and_the_seed_does_not(alice):
    # Vector leg only (the query shares no word with any memory), whose own
    # scores then order everything: one memory at the query's meaning, the
    # rest far from it.
    answer = make_memory(alice, "Takes the number 28 tram to work.", embedding=axis(0))
    runner_up = make_memory(alice, "Bought a new umbrella.", embedding=towards(0.12))
    field = [make_memory(alice, f"Unrelated note {n}.", embedding=towards(0.05)) for n in range(8)]
    query = axis(0)

    default = recall(alice, "commute", query_embedding=query, dry_run=True, explain=True)
    assert [item.memory.pk for item in default.memories] == [answer.pk]
    reasons = {item.memory.pk: item.cut_reason for item in default.cut}
    assert reasons[runner_up.pk] == "past_falloff"
    assert default.to_dict()["cut"][0]["cut_reason"] == "past_falloff"

    seed = recall(
        alice, "commute", query_embedding=query, dry_run=True, explain=True, profile="seed"
    )
    assert len(seed.memories) == 2 + len(field)
    assert all(item.cut_reason != "past_falloff" for item in seed.cut)


@pytest.mark.django_db
def test_the_freshness_pipeline_keeps_its_top_five(alice):
    for n in range(7):
        make_memory(alice, f"Chess club night number {n}.", embedding=towards(0.9 - n / 10))
    result = recall(
        alice, "chess club", pipeline="freshness", query_embedding=axis(0), dry_run=True
    )
    assert len(result.memories) == 5
