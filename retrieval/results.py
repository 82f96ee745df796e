"""What a recall returns. The API, the pages, the commands and the evaluation
all consume these shapes; ``RecallResult.to_dict()`` is the JSON the search
route answers with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memories.models import Memory


class RecallFailed(Exception):
    """Every leg failed (or the whole recall timed out): nothing could be searched."""

    def __init__(self, message: str, legs: dict[str, LegReport] | None = None) -> None:
        super().__init__(message)
        self.legs = legs or {}


@dataclass
class LegReport:
    name: str
    # ok | skipped | failed | timeout
    status: str
    ms: float = 0.0
    count: int = 0
    error: str | None = None
    # Memory ids, best first, and the leg's own score of each (cosine
    # similarity, BM25, ts_rank, entities named).
    ranked_ids: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    # The vector leg's query embedding (reused by the fusion).
    query_embedding: tuple[float, ...] | None = None

    def ranking(self) -> list[tuple[int, float]]:
        return list(zip(self.ranked_ids, self.scores, strict=True))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "ms": round(self.ms, 2),
            "count": self.count,
        }
        if self.error:
            data["error"] = self.error
        return data


@dataclass
class ScoredMemory:
    memory: Memory
    score: float
    # How the score was made (retrieval/fusion.py, retrieval/freshness.py).
    # fusion: {"ranks": {leg: rank}, "z": {leg: z}, "contributions": {leg: part},
    # "gate", "similarity", or "rrf" under the seed profile; then "relevance",
    # "decay", "weight", maybe "superseded_by_newer" and "current_state",
    # "final"}; freshness: {"bm25", "cosine", "relevance", "freshness",
    # "relevance_norm", "freshness_norm", "final"}, without embeddings no
    # "freshness" nor "freshness_norm" (the BM25 order stands alone).
    parts: dict[str, Any] = field(default_factory=dict)
    # Tokens of the memory's rendered line in the block.
    tokens: int = 0
    # 0-based line position inside the block (serial-position order), None if cut.
    position: int | None = None
    # Why a candidate was left out: "below_min_score" | "below_relative_cut"
    # (not retrieved) | "past_falloff" (past where the scores fall off) | "over_budget".
    cut_reason: str | None = None
    # The memory's text as the block shows it, when the packer had to cut it
    # short (a memory may take at most a share of the budget); None: whole.
    shortened: str | None = None

    @property
    def shown_content(self) -> str:
        return self.memory.content if self.shortened is None else self.shortened

    def to_dict(self) -> dict[str, Any]:
        from memories.memory_json import memory_to_dict

        data = memory_to_dict(self.memory)
        data["score"] = self.score
        data["score_parts"] = self.parts
        data["tokens"] = self.tokens
        data["position"] = self.position
        if self.cut_reason:
            data["cut_reason"] = self.cut_reason
        if self.shortened is not None:
            data["shown_content"] = self.shortened
        return data


@dataclass
class RecallResult:
    pipeline: str
    query: str
    as_of: datetime
    token_budget: int
    # Packed memories in score order, best first.
    memories: list[ScoredMemory]
    # The fenced block in serial-position order ('' when nothing was packed).
    block: str
    block_tokens: int
    legs: dict[str, LegReport]
    # Only filled when explain=True: candidates that did not make the block.
    cut: list[ScoredMemory] = field(default_factory=list)
    explain: bool = False
    ms: float = 0.0
    # Milliseconds by stage: start (arguments), legs (all legs, wall clock),
    # embed (the query's embedding, inside the vector leg), fuse (loading the
    # candidates and fusing), pack (packing, rendering, queueing the stamp).
    timings: dict[str, float] = field(default_factory=dict)
    # The fusion profile that scored it (retrieval/constants.py).
    profile: str = "default"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pipeline": self.pipeline,
            "profile": self.profile,
            "as_of": self.as_of.isoformat(),
            "memories": [item.to_dict() for item in self.memories],
            "block": self.block,
            "block_tokens": self.block_tokens,
            "token_budget": self.token_budget,
            "legs": {name: report.to_dict() for name, report in self.legs.items()},
            "ms": round(self.ms, 2),
        }
        if self.explain:
            data["cut"] = [item.to_dict() for item in self.cut]
        return data
