"""Ranking metrics, as the LoCoMo paper and the IR literature define them.

Relevance is binary: a memory either is one of the query's evidence items or is
not. Rankings are lists of memory ids, best first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """The fraction of the relevant items found in the top ``k`` (LoCoMo's R@k)."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("recall is undefined without relevant items")
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def ndcg_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Normalised discounted cumulative gain with binary gains: DCG@k / ideal DCG@k."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("nDCG is undefined without relevant items")
    dcg = sum(
        1.0 / math.log2(position + 1)
        for position, item in enumerate(ranked[:k], start=1)
        if item in wanted
    )
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[str], relevant: Iterable[str]) -> float:
    """1 / the position of the first relevant item; 0 when none is ranked at all."""
    wanted = set(relevant)
    for position, item in enumerate(ranked, start=1):
        if item in wanted:
            return 1.0 / position
    return 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile with linear interpolation between neighbours."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    below = math.floor(position)
    above = math.ceil(position)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


@dataclass(frozen=True)
class QueryOutcome:
    """One query's evaluation: what was asked, what came back, at what cost."""

    conversation: str
    category: str
    query: str
    relevant: list[str]
    # The fused ranking before packing, best first (dataset memory ids).
    ranked: list[str]
    # What went into the block (dataset memory ids).
    packed_ids: list[str]
    # Tokens of the rendered block and how many memories it holds.
    block_tokens: int
    packed: int
    # Wall-clock time of the recall call, query embedding included.
    ms: float
    # Legs that failed or timed out on this query.
    failed_legs: tuple[str, ...] = ()


def block_figures(outcomes: Sequence[QueryOutcome]) -> dict:
    """What the blocks hold, and how much of it was asked for.

    ``hit_rate``: the share of queries whose block holds at least one relevant
    memory; ``memories`` and ``tokens``: the mean block's memories and tokens;
    ``precision``: the share of packed memories that are relevant, averaged
    over the queries whose block holds any; ``tokens_per_relevant``: all block
    tokens over all relevant memories packed; ``relevant_packed``: the share
    of every query's relevant memories that made it into its block.
    """
    if not outcomes:
        return {
            "hit_rate": 0.0,
            "memories": 0.0,
            "tokens": 0.0,
            "precision": 0.0,
            "tokens_per_relevant": None,
            "relevant_packed": 0.0,
        }
    found = [len(set(o.packed_ids) & set(o.relevant)) for o in outcomes]
    with_block = [(o, hits) for o, hits in zip(outcomes, found, strict=True) if o.packed_ids]
    relevant_packed = sum(found)
    wanted = sum(len(set(o.relevant)) for o in outcomes)
    tokens = sum(o.block_tokens for o in outcomes)
    return {
        "hit_rate": fmean(hits > 0 for hits in found),
        "memories": fmean(o.packed for o in outcomes),
        "tokens": tokens / len(outcomes),
        "precision": fmean(hits / len(o.packed_ids) for o, hits in with_block)
        if with_block
        else 0.0,
        "tokens_per_relevant": tokens / relevant_packed if relevant_packed else None,
        "relevant_packed": relevant_packed / wanted if wanted else 0.0,
    }


def ranking_and_block(outcomes: Sequence[QueryOutcome], ks: Sequence[int]) -> dict:
    """``ranking_figures`` with the blocks' figures under ``block``."""
    return {**ranking_figures(outcomes, ks), "block": block_figures(outcomes)}


def ranking_figures(outcomes: Sequence[QueryOutcome], ks: Sequence[int]) -> dict:
    """R@k, nDCG@k (as fractions) and MRR, averaged over the given queries."""
    if not outcomes:
        return {"queries": 0, "recall": {}, "ndcg": {}, "mrr": 0.0}
    return {
        "queries": len(outcomes),
        "recall": {
            str(k): fmean(recall_at_k(o.ranked, o.relevant, k) for o in outcomes) for k in ks
        },
        "ndcg": {str(k): fmean(ndcg_at_k(o.ranked, o.relevant, k) for o in outcomes) for k in ks},
        "mrr": fmean(reciprocal_rank(o.ranked, o.relevant) for o in outcomes),
    }


def summarize(outcomes: Sequence[QueryOutcome], ks: Sequence[int]) -> dict:
    """Every figure of one run: overall, per category, per conversation, cost."""
    categories = sorted({o.category for o in outcomes})
    conversations = list(dict.fromkeys(o.conversation for o in outcomes))
    latencies = [o.ms for o in outcomes]
    tokens = [o.block_tokens for o in outcomes]
    failures: dict[str, int] = {}
    for outcome in outcomes:
        for leg in outcome.failed_legs:
            failures[leg] = failures.get(leg, 0) + 1
    return {
        "overall": ranking_figures(outcomes, ks),
        "by_category": {
            category: ranking_and_block([o for o in outcomes if o.category == category], ks)
            for category in categories
        },
        "by_conversation": {
            conversation: ranking_and_block(
                [o for o in outcomes if o.conversation == conversation], ks
            )
            for conversation in conversations
        },
        "tokens_per_block": {
            "mean": fmean(tokens) if tokens else 0.0,
            "p50": percentile(tokens, 0.5),
            "max": max(tokens, default=0),
            "memories_per_block": fmean(o.packed for o in outcomes) if outcomes else 0.0,
        },
        "block": block_figures(outcomes),
        "latency_ms": {"p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95)},
        "failed_legs": failures,
    }
