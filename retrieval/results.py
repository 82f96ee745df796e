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
    # Memory ids, best first.
    ranked_ids: list[int] = field(default_factory=list)

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
    # How the score was made. fusion: {"ranks": {leg: rank}, "rrf", "decay",
    # "weight", "final"}; freshness: {"bm25", "cosine", "relevance",
    # "freshness", "relevance_norm", "freshness_norm", "final"}.
    parts: dict[str, Any] = field(default_factory=dict)
    # Tokens of the memory's rendered line in the block.
    tokens: int = 0
    # 0-based line position inside the block (serial-position order), None if cut.
    position: int | None = None
    # Why a candidate was left out: "below_min_score" | "over_budget".
    cut_reason: str | None = None


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

    def to_dict(self) -> dict[str, Any]:
        from retrieval.serialize import scored_memory_to_dict

        data: dict[str, Any] = {
            "pipeline": self.pipeline,
            "as_of": self.as_of.isoformat(),
            "memories": [scored_memory_to_dict(item) for item in self.memories],
            "block": self.block,
            "block_tokens": self.block_tokens,
            "token_budget": self.token_budget,
            "legs": {name: report.to_dict() for name, report in self.legs.items()},
            "ms": round(self.ms, 2),
        }
        if self.explain:
            data["cut"] = [scored_memory_to_dict(item) for item in self.cut]
        return data
