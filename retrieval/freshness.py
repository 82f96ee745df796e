"""The freshness pipeline (seed 003): BM25 top 20 → cosine rerank → top 5 →
blend of relevance and freshness, re-sorted.

It is a second, selectable pipeline, not a fallback of the fusion one. Its only
fallback runs the other way: without embeddings the keyword results stand
alone, the BM25 top five in BM25 order (seed 003: "I return the keyword
results alone"), with no freshness blend.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memories.models import Memory
from retrieval import replay
from retrieval.bm25 import bm25_scores
from retrieval.constants import (
    BM25_B,
    BM25_TOP,
    FRESHNESS_WEIGHT,
    RELEVANCE_WEIGHT,
    RERANK_TOP,
    TYPE_PROFILES,
)
from retrieval.fusion import age_days, cosine
from retrieval.legs import LegSkipped, run_step
from retrieval.results import LegReport, ScoredMemory


def freshness(memory: Memory, as_of: datetime) -> float:
    """2 ** (−age / half-life of the memory's type), age in days since last confirmed."""
    return 2.0 ** (-age_days(memory, as_of) / TYPE_PROFILES[memory.type].half_life_days)


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to 0..1 over the set; a set whose values are all equal scales to 1."""
    low, high = min(values), max(values)
    if math.isclose(low, high, rel_tol=0.0, abs_tol=1e-12):
        return [1.0 for _ in values]
    return [(value - low) / (high - low) for value in values]


@dataclass
class Candidate:
    memory: Memory
    bm25: float
    cosine: float | None = None


def blend(candidates: Sequence[Candidate], as_of: datetime) -> list[ScoredMemory]:
    """0.7 × normalised relevance + 0.3 × normalised freshness, best first.

    Relevance is the cosine similarity of the reranked candidates (one with no
    vector counts as 0: no evidence either way).
    """
    if not candidates:
        return []
    relevance = [candidate.cosine or 0.0 for candidate in candidates]
    fresh = [freshness(candidate.memory, as_of) for candidate in candidates]
    relevance_norm = min_max(relevance)
    fresh_norm = min_max(fresh)
    scored: list[ScoredMemory] = []
    for index, candidate in enumerate(candidates):
        final = RELEVANCE_WEIGHT * relevance_norm[index] + FRESHNESS_WEIGHT * fresh_norm[index]
        scored.append(
            ScoredMemory(
                memory=candidate.memory,
                score=final,
                parts={
                    "bm25": candidate.bm25,
                    "cosine": candidate.cosine,
                    "relevance": relevance[index],
                    "freshness": fresh[index],
                    "relevance_norm": relevance_norm[index],
                    "freshness_norm": fresh_norm[index],
                    "final": final,
                },
            )
        )
    # Stable sort: equal blends keep the relevance order they came in.
    scored.sort(key=lambda item: -item.score)
    return scored


def bm25_order(candidates: Sequence[Candidate]) -> list[ScoredMemory]:
    """The keyword results alone (no embeddings): BM25 order as it came, each
    scored by its BM25 min-max normalised over the candidates; no freshness."""
    if not candidates:
        return []
    relevance_norm = min_max([candidate.bm25 for candidate in candidates])
    return [
        ScoredMemory(
            memory=candidate.memory,
            score=relevance_norm[index],
            parts={
                "bm25": candidate.bm25,
                "cosine": None,
                "relevance": candidate.bm25,
                "relevance_norm": relevance_norm[index],
                "final": relevance_norm[index],
            },
        )
        for index, candidate in enumerate(candidates)
    ]


def rerank(
    candidates: list[Candidate],
    query_embedding: Sequence[float],
    fresh_vectors: dict[int, Sequence[float]] | None = None,
) -> list[Candidate]:
    """Candidates by cosine similarity to the query, those without a vector last (BM25 order).

    ``fresh_vectors`` holds vectors embedded just now for candidates that had
    none stored yet (written seconds ago, imported, or their task failed).
    """
    fresh_vectors = fresh_vectors or {}
    for candidate in candidates:
        vector = candidate.memory.embedding
        if vector is None:
            vector = fresh_vectors.get(candidate.memory.pk)
        if vector is not None:
            candidate.cosine = cosine(vector, query_embedding)
    return sorted(
        candidates,
        key=lambda candidate: (candidate.cosine is None, -(candidate.cosine or 0.0)),
    )


def freshness_pipeline(
    owner_id: int,
    query: str,
    as_of: datetime,
    *,
    types: tuple[str, ...] | None,
    query_embedding: Sequence[float] | None,
    embedder,
    timeout: float,
    replaying: bool = False,
) -> tuple[list[ScoredMemory], dict[str, LegReport]]:
    """Top RERANK_TOP memories, blended and best first, and a report of each stage.

    Raises nothing for a failed stage: a failed ``bm25`` stage leaves no
    candidates (the caller decides that this is an error); a failed or skipped
    ``rerank`` leaves the BM25 order, unblended.
    """
    score = replay.bm25_scores if replaying else bm25_scores
    bm25_report, scores = run_step(
        "bm25",
        lambda cursor: score(cursor, owner_id, query, as_of, types=types, top=BM25_TOP, b=BM25_B),
        timeout,
    )
    scores = scores or []
    bm25_report.ranked_ids = [memory_id for memory_id, _ in scores]
    bm25_report.count = len(scores)
    reports = {"bm25": bm25_report}
    owned = Memory.objects.for_owner(owner_id)
    rows = owned.active_at(as_of) if replaying else owned.active()
    memories = (
        rows.defer("tsv")
        .select_related("retrieval_stamp")
        .in_bulk([memory_id for memory_id, _ in scores])
    )
    candidates = [
        Candidate(memory=memories[memory_id], bm25=score)
        for memory_id, score in scores
        if memory_id in memories
    ]

    def reranked(_cursor) -> list[Candidate]:
        started = time.monotonic()
        embedding = query_embedding
        unembedded = [c.memory for c in candidates if c.memory.embedding is None]
        if embedder is None and embedding is None:
            raise LegSkipped("no embedding provider configured")
        if embedder is None and len(unembedded) == len(candidates):
            raise LegSkipped("no embeddings stored and no provider to make them")
        texts = ([query] if embedding is None else []) + [m.content for m in unembedded]
        vectors = embedder.embed(texts, timeout=timeout) if texts and embedder else []
        if embedding is None:
            embedding, vectors = vectors[0], vectors[1:]
        # Seed 003 embeds the query and the candidates: one stored a moment ago
        # without its vector yet is exactly what this pipeline must not sink.
        fresh = {memory.pk: vector for memory, vector in zip(unembedded, vectors, strict=False)}
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"embedding took longer than {timeout:g} s")
        return rerank(candidates, [float(x) for x in embedding], fresh)

    rerank_report, ordered = (
        run_step("rerank", reranked, timeout)
        if candidates
        else (LegReport(name="rerank", status="skipped", error="no candidates"), None)
    )
    reports["rerank"] = rerank_report
    chosen = (ordered or candidates)[:RERANK_TOP]
    rerank_report.ranked_ids = [candidate.memory.pk for candidate in chosen] if ordered else []
    rerank_report.count = len(rerank_report.ranked_ids)
    if ordered is None:
        return bm25_order(chosen), reports
    return blend(chosen, as_of), reports
