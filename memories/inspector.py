"""The retrieval inspector's score bars: how each candidate's score was made.

Pure shaping of ``ScoredMemory.parts`` for the template; the scores themselves
come from ``retrieval.recall.recall``.
"""

from __future__ import annotations

from dataclasses import dataclass

from memories.models import Memory
from retrieval.constants import FRESHNESS_WEIGHT, LEGS, PROFILES, RELEVANCE_WEIGHT
from retrieval.results import ScoredMemory


@dataclass
class Bar:
    label: str
    # (css class, width in %, title) for each stacked segment.
    segments: list[tuple[str, float, str]]
    value: str


@dataclass
class Candidate:
    item: ScoredMemory
    bars: list[Bar]

    @property
    def memory(self) -> Memory:
        return self.item.memory


def _width(value: float | None, scale: float) -> float:
    if not value or scale <= 0:
        return 0.0
    return round(max(0.0, min(100.0, 100.0 * value / scale)), 2)


def _leg_parts(parts: dict, profile_name: str) -> dict[str, float]:
    """Each leg's part of the relevance: its contribution, or weight / (k + rank) under RRF."""
    if "contributions" in parts:
        return dict(parts["contributions"])
    profile = PROFILES[profile_name]
    return {
        leg: profile.leg_weights.get(leg, 1.0) / (profile.rrf_k + rank)
        for leg, rank in parts.get("ranks", {}).items()
    }


def _fusion_bars(items: list[ScoredMemory], profile_name: str) -> list[Candidate]:
    top_relevance = max((item.parts.get("relevance", 0.0) for item in items), default=0.0)
    top_final = max((item.parts.get("final", 0.0) for item in items), default=0.0)
    top_weight = max([1.0, *(item.parts.get("weight", 0.0) for item in items)])
    candidates = []
    for item in items:
        parts = item.parts
        ranks = parts.get("ranks", {})
        leg_parts = _leg_parts(parts, profile_name)
        relevance_segments = [
            (
                f"bar-{leg}",
                _width(leg_parts[leg], top_relevance),
                f"{leg} rank {ranks[leg]}: {leg_parts[leg]:.4f}",
            )
            for leg in LEGS
            if leg in leg_parts
        ]
        leg_ranks = ", ".join(f"{leg} #{ranks[leg]}" for leg in LEGS if leg in ranks)
        factor = parts.get("decay", 1.0) * parts.get("current_state", 1.0)
        if "superseded_by_newer" in parts:
            factor *= parts["final"] / max(
                parts.get("relevance", 0) * parts.get("weight", 1) * factor, 1e-12
            )
        candidates.append(
            Candidate(
                item,
                [
                    Bar("relevance", relevance_segments, f"{parts.get('relevance', 0):.4f}"),
                    Bar(
                        "× age",
                        [("bar-final", _width(factor, 1.0), "decay and current-state recency")],
                        f"{factor:.3f}",
                    ),
                    Bar(
                        "× type",
                        [("bar-final", _width(parts.get("weight"), top_weight), "type weight")],
                        f"{parts.get('weight', 0):.2f}",
                    ),
                    Bar(
                        "= score",
                        [("bar-relevance", _width(parts.get("final"), top_final), leg_ranks)],
                        f"{parts.get('final', 0):.4f}",
                    ),
                ],
            )
        )
    return candidates


def _freshness_bars(items: list[ScoredMemory]) -> list[Candidate]:
    candidates = []
    for item in items:
        parts = item.parts
        relevance = RELEVANCE_WEIGHT * (parts.get("relevance_norm") or 0.0)
        fresh = FRESHNESS_WEIGHT * (parts.get("freshness_norm") or 0.0)
        cosine = parts.get("cosine")
        candidates.append(
            Candidate(
                item,
                [
                    Bar(
                        "BM25",
                        [("bar-bm25", _width(parts.get("bm25"), _top(items, "bm25")), "BM25")],
                        f"{parts.get('bm25') or 0:.3f}",
                    ),
                    Bar(
                        "cosine",
                        [("bar-vector", _width(cosine, 1.0), "cosine similarity")],
                        "—" if cosine is None else f"{cosine:.3f}",
                    ),
                    Bar(
                        "freshness",
                        [("bar-freshness", _width(parts.get("freshness"), 1.0), "freshness")],
                        f"{parts.get('freshness') or 0:.3f}",
                    ),
                    Bar(
                        "= score",
                        [
                            (
                                "bar-relevance",
                                _width(relevance, 1.0),
                                f"{RELEVANCE_WEIGHT} × relevance {relevance:.3f}",
                            ),
                            (
                                "bar-freshness",
                                _width(fresh, 1.0),
                                f"{FRESHNESS_WEIGHT} × freshness {fresh:.3f}",
                            ),
                        ],
                        f"{parts.get('final') or 0:.3f}",
                    ),
                ],
            )
        )
    return candidates


def _top(items: list[ScoredMemory], part: str) -> float:
    return max((item.parts.get(part) or 0.0 for item in items), default=0.0)


def score_bars(
    pipeline: str, items: list[ScoredMemory], profile_name: str = "default"
) -> list[Candidate]:
    if pipeline == "fusion":
        return _fusion_bars(items, profile_name)
    return _freshness_bars(items)
