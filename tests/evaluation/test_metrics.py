"""The metric functions against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from retrieval.evaluation.metrics import (
    QueryOutcome,
    ndcg_at_k,
    percentile,
    recall_at_k,
    reciprocal_rank,
    summarize,
)

RANKED = ["a", "b", "c", "d", "e"]


def test_it_counts_the_fraction_of_relevant_items_in_the_top_k():
    assert recall_at_k(RANKED, ["b"], 1) == 0.0
    assert recall_at_k(RANKED, ["b"], 2) == 1.0
    # Two of three evidence items in the top 3; "z" is never ranked.
    assert recall_at_k(RANKED, ["a", "c", "z"], 3) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, ["a", "c", "z"], 25) == pytest.approx(2 / 3)


def test_it_gives_zero_recall_for_an_empty_ranking():
    assert recall_at_k([], ["a"], 10) == 0.0


def test_it_refuses_recall_without_relevant_items():
    with pytest.raises(ValueError):
        recall_at_k(RANKED, [], 5)


def test_it_discounts_gains_by_log_position():
    # One relevant item at position 2: DCG = 1/log2(3), ideal DCG = 1/log2(2) = 1.
    assert ndcg_at_k(RANKED, ["b"], 5) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(RANKED, ["b"], 1) == 0.0
    assert ndcg_at_k(RANKED, ["a"], 5) == 1.0


def test_it_normalises_by_the_ideal_ranking_of_all_relevant_items():
    # Relevant a (pos 1) and d (pos 4): DCG@5 = 1 + 1/log2(5) = 1.43068;
    # ideal: two relevant items at positions 1 and 2 = 1 + 1/log2(3) = 1.63093.
    expected = (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(RANKED, ["a", "d"], 5) == pytest.approx(expected)
    assert round(expected, 4) == 0.8772
    # At k=1 the ideal holds one item only: DCG@1 = 1 = IDCG@1.
    assert ndcg_at_k(RANKED, ["a", "d"], 1) == 1.0


def test_it_takes_the_reciprocal_of_the_first_relevant_position():
    assert reciprocal_rank(RANKED, ["c", "e"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, ["z"]) == 0.0


def test_it_interpolates_percentiles():
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 0.5) == 25.0
    # position (4 - 1) * 0.95 = 2.85: 30 + 0.85 * 10
    assert percentile(values, 0.95) == pytest.approx(38.5)
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([], 0.5) == 0.0


def outcome(conversation: str, category: str, ranked: list[str], relevant: list[str], ms: float):
    return QueryOutcome(
        conversation=conversation,
        category=category,
        query="q",
        relevant=relevant,
        ranked=ranked,
        packed_ids=ranked[:2],
        block_tokens=int(ms),
        packed=len(ranked),
        ms=ms,
        failed_legs=("vector",) if not ranked else (),
    )


def test_it_summarizes_overall_per_category_and_per_conversation():
    outcomes = [
        outcome("c1", "single-hop", ["a", "b"], ["a"], 10.0),  # R@1 1, RR 1
        outcome("c1", "multi-hop", ["x", "a", "b"], ["a", "b"], 20.0),  # R@1 0, R@5 1, RR 1/2
        outcome("c2", "single-hop", [], ["q"], 30.0),  # nothing
    ]
    summary = summarize(outcomes, [1, 5])

    overall = summary["overall"]
    assert overall["queries"] == 3
    assert overall["recall"]["1"] == pytest.approx(1 / 3)
    assert overall["recall"]["5"] == pytest.approx(2 / 3)
    assert overall["mrr"] == pytest.approx((1 + 0.5 + 0) / 3)
    # nDCG@5 of the multi-hop query: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3) = 0.6934
    assert overall["ndcg"]["5"] == pytest.approx((1 + 0.69342 + 0) / 3, abs=1e-4)

    assert summary["by_category"]["single-hop"]["recall"]["1"] == 0.5
    assert summary["by_category"]["multi-hop"]["mrr"] == 0.5
    assert summary["by_conversation"]["c1"]["recall"]["5"] == 1.0
    assert summary["by_conversation"]["c2"]["recall"]["5"] == 0.0
    assert summary["latency_ms"] == {"p50": 20.0, "p95": pytest.approx(29.0)}
    assert summary["tokens_per_block"]["mean"] == 20.0
    assert summary["tokens_per_block"]["max"] == 30
    assert summary["tokens_per_block"]["memories_per_block"] == pytest.approx(5 / 3)
    assert summary["failed_legs"] == {"vector": 1}


def test_it_measures_what_the_blocks_hold():
    def packed(category: str, packed_ids: list[str], relevant: list[str], tokens: int):
        return QueryOutcome(
            conversation="c1",
            category=category,
            query="q",
            relevant=relevant,
            ranked=packed_ids,
            packed_ids=packed_ids,
            block_tokens=tokens,
            packed=len(packed_ids),
            ms=1.0,
        )

    outcomes = [
        packed("single-hop", ["a"], ["a"], 20),  # hit, precision 1
        packed("single-hop", ["x", "y", "a", "z"], ["a"], 80),  # hit, precision 1/4
        packed("multi-hop", ["a", "x"], ["a", "b"], 40),  # hit, precision 1/2
        packed("multi-hop", ["x", "y"], ["a"], 30),  # miss, precision 0
        packed("distractor", [], ["a"], 0),  # empty block: a miss, no precision
    ]
    summary = summarize(outcomes, [1])

    block = summary["block"]
    assert block["hit_rate"] == pytest.approx(3 / 5)
    assert block["memories"] == pytest.approx(9 / 5)
    assert block["tokens"] == pytest.approx(170 / 5)
    assert block["precision"] == pytest.approx((1 + 0.25 + 0.5 + 0) / 4)
    assert block["tokens_per_relevant"] == pytest.approx(170 / 3)
    assert block["relevant_packed"] == pytest.approx(3 / 6)

    single = summary["by_category"]["single-hop"]["block"]
    assert (single["hit_rate"], single["memories"], single["tokens"]) == (1.0, 2.5, 50.0)
    assert single["precision"] == pytest.approx(0.625)
    multi = summary["by_category"]["multi-hop"]["block"]
    assert (multi["hit_rate"], multi["memories"], multi["precision"]) == (0.5, 2.0, 0.25)
    distractor = summary["by_category"]["distractor"]["block"]
    assert (distractor["hit_rate"], distractor["memories"], distractor["precision"]) == (
        0.0,
        0.0,
        0.0,
    )
    assert distractor["tokens_per_relevant"] is None
    assert summary["by_conversation"]["c1"]["block"] == block
