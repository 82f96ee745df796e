"""Reciprocal rank fusion of the legs, recency decay and type weights: pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from memories.models import Memory
from retrieval.constants import (
    DECAY_HALF_LIFE_DAYS,
    LEG_WEIGHTS,
    MIN_SCORE,
    RRF_K,
    TYPE_PROFILES,
)
from retrieval.results import ScoredMemory

SECONDS_PER_DAY = 86400.0


def reference_time(memory: Memory, as_of: datetime) -> datetime:
    """The moment a memory's age counts from, seen from ``as_of``.

    Its last confirmation, unless that lies after ``as_of`` (a replay must not
    know the future), else its creation.
    """
    confirmed = memory.last_confirmed_at
    if confirmed is not None and confirmed <= as_of:
        return confirmed
    return memory.created_at


def age_days(memory: Memory, as_of: datetime) -> float:
    return max(0.0, (as_of - reference_time(memory, as_of)).total_seconds() / SECONDS_PER_DAY)


def decay(memory: Memory, as_of: datetime) -> float:
    """0.5 ** (days since last confirmed / 90): a memory unconfirmed for 90 days counts half.

    Only for types that can go stale (``TypeProfile.decays``); a record of an
    event keeps 1.0.
    """
    if not TYPE_PROFILES[memory.type].decays:
        return 1.0
    return 0.5 ** (age_days(memory, as_of) / DECAY_HALF_LIFE_DAYS)


def type_weight(memory_type: str) -> float:
    return TYPE_PROFILES[memory_type].weight


def rrf_ranks(rankings: Mapping[str, Sequence[int]]) -> dict[int, dict[str, int]]:
    """For each memory id found by any leg, its 1-based rank in each leg that found it."""
    ranks: dict[int, dict[str, int]] = {}
    for leg, ids in rankings.items():
        for rank, memory_id in enumerate(ids, start=1):
            ranks.setdefault(memory_id, {}).setdefault(leg, rank)
    return ranks


def rrf_score(
    leg_ranks: Mapping[str, int],
    k: float = RRF_K,
    weights: Mapping[str, float] = LEG_WEIGHTS,
) -> float:
    """Sum of weight / (k + rank) over the legs: being found twice beats being found once."""
    return sum(weights.get(leg, 1.0) / (k + rank) for leg, rank in leg_ranks.items())


def fuse(
    rankings: Mapping[str, Sequence[int]],
    memories: Mapping[int, Memory],
    as_of: datetime,
    *,
    min_score: float = MIN_SCORE,
) -> tuple[list[ScoredMemory], list[ScoredMemory]]:
    """Score every candidate; return (kept best first, cut below the minimum score).

    Ids missing from ``memories`` (no longer active by the time they were
    loaded) are dropped.
    """
    kept: list[ScoredMemory] = []
    cut: list[ScoredMemory] = []
    for memory_id, leg_ranks in rrf_ranks(rankings).items():
        memory = memories.get(memory_id)
        if memory is None:
            continue
        rrf = rrf_score(leg_ranks)
        memory_decay = decay(memory, as_of)
        weight = type_weight(memory.type)
        final = rrf * memory_decay * weight
        item = ScoredMemory(
            memory=memory,
            score=final,
            parts={
                "ranks": dict(leg_ranks),
                "rrf": rrf,
                "decay": memory_decay,
                "weight": weight,
                "final": final,
            },
        )
        if final < min_score:
            item.cut_reason = "below_min_score"
            cut.append(item)
        else:
            kept.append(item)
    kept.sort(key=_best_first)
    cut.sort(key=_best_first)
    return kept, cut


def _best_first(item: ScoredMemory) -> tuple[float, int]:
    return (-item.score, item.memory.pk)
