"""``recall()``: the one entry point of retrieval, for views, commands, jobs and tests."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial

from django.conf import settings
from django.utils import timezone

from memories.models import MemoryType
from retrieval.candidates import load_candidates, load_successors
from retrieval.constants import (
    LEG_LIMIT,
    LEGS,
    PIPELINES,
    PROFILES,
    STAMP_GRANULARITY,
    FusionProfile,
)
from retrieval.freshness import freshness_pipeline
from retrieval.fusion import fuse
from retrieval.legs import LegRequest, run_legs, run_step
from retrieval.lexemes import clean_query
from retrieval.models import RetrievalStamp
from retrieval.packing import pack
from retrieval.replay import is_past, needs_replay
from retrieval.results import LegReport, RecallFailed, RecallResult, ScoredMemory
from timothy.concurrency import ThreadPool, must_run_inline

logger = logging.getLogger(__name__)

FAILED = ("failed", "timeout")


def recall(
    owner,
    query: str,
    *,
    pipeline: str | None = None,
    token_budget: int | None = None,
    types: Sequence[str] | None = None,
    as_of: datetime | None = None,
    explain: bool = False,
    dry_run: bool = False,
    legs: Sequence[str] | None = None,
    query_embedding: Sequence[float] | None = None,
    session_id: str = "",
    profile: str | None = None,
    exact_scan_max_rows: int | None = None,
) -> RecallResult:
    """The owner's memories that answer ``query``, packed into a fenced block.

    ``legs`` limits the fusion legs (for evaluation); ``types`` limits memory
    types; ``as_of`` replays the store as it stood then; ``dry_run`` leaves
    ``last_retrieved_at`` alone; ``explain`` also returns what was cut and why;
    ``query_embedding`` spares embedding the query; ``profile`` names the fusion
    profile (default: the ``TIMOTHY_RETRIEVAL_PROFILE`` setting);
    ``exact_scan_max_rows`` overrides the vector leg's strategy threshold
    (benchmarks compare strategies with it). Raises
    ``ValueError`` for bad arguments and ``RecallFailed`` when nothing could be
    searched in time.
    """
    started = time.perf_counter()
    deadline = time.monotonic() + settings.RECALL_TIMEOUT
    pipeline = _pipeline(pipeline)
    fusion_profile = _profile(profile)
    budget = _budget(token_budget)
    type_filter = _types(types)
    leg_names = _legs(legs)
    as_of = _as_of(as_of)
    embedding = _embedding(query_embedding)
    if not isinstance(query, str):
        raise ValueError("query must be text.")
    query = clean_query(query)
    owner_id = owner.pk if hasattr(owner, "pk") else int(owner)
    # The vector leg embeds the query (unless given); the freshness pipeline also
    # embeds candidates that have no vector stored yet.
    needs_embedder = pipeline == "freshness" or (embedding is None and "vector" in leg_names)
    embedder = _embedding_provider() if needs_embedder else None
    timeout = min(settings.LEG_TIMEOUT, settings.RECALL_TIMEOUT)
    # Where the time went, in ms (the search route's Server-Timing header).
    timings = {"start": _ms_since(started)}

    replaying = needs_replay(owner_id, as_of)
    if pipeline == "fusion":
        request = LegRequest(
            owner_id=owner_id,
            query=query,
            as_of=as_of,
            types=type_filter,
            limit=LEG_LIMIT,
            query_embedding=embedding,
            embedder=embedder,
            timeout=timeout,
            text_ranker=fusion_profile.text_ranker,
            entity_match=fusion_profile.entity_match,
            replay=replaying,
            exact_scan_max_rows=exact_scan_max_rows,
        )
        reports = run_legs(leg_names, request, deadline=deadline)
        timings["legs"] = _ms_since(started) - timings["start"]
        _raise_if_nothing_searched(reports)
        candidates, cut = _fused(
            owner_id,
            reports,
            as_of,
            fusion_profile,
            query,
            embedding,
            replaying=replaying,
            timeout=timeout,
        )
    else:
        candidates, reports = freshness_pipeline(
            owner_id,
            query,
            as_of,
            types=type_filter,
            query_embedding=embedding,
            embedder=embedder,
            timeout=timeout,
            replaying=replaying,
        )
        timings["legs"] = _ms_since(started) - timings["start"]
        _raise_if_nothing_searched({"bm25": reports["bm25"]})
        cut = []
    if time.monotonic() > deadline:
        raise RecallFailed(
            f"recall took longer than {settings.RECALL_TIMEOUT:g} s", legs=dict(reports)
        )

    timings["fuse"] = _ms_since(started) - timings["start"] - timings["legs"]
    packed = pack(
        candidates,
        budget,
        max_item_share=fusion_profile.max_item_share if pipeline == "fusion" else None,
        # The block ends where the fused scores fall off (the freshness
        # pipeline's top five are its own cut).
        falloff=fusion_profile.block_falloff if pipeline == "fusion" else 0.0,
        max_memories=fusion_profile.block_max_memories if pipeline == "fusion" else None,
    )
    # Retrieval in a replay of the past happened nowhere: nothing to stamp.
    if not dry_run and not is_past(as_of):
        _mark_retrieved(owner_id, packed.packed)
    elapsed = (time.perf_counter() - started) * 1000
    timings["pack"] = elapsed - timings["fuse"] - timings["legs"] - timings["start"]
    timings["embed"] = getattr(embedder, "ms", 0.0)
    logger.debug(
        "recall owner=%s session=%s pipeline=%s packed=%d in %.1f ms",
        owner_id,
        session_id,
        pipeline,
        len(packed.packed),
        elapsed,
    )
    return RecallResult(
        pipeline=pipeline,
        query=query,
        as_of=as_of,
        token_budget=budget,
        memories=list(packed.packed),
        block=packed.block,
        block_tokens=packed.block_tokens,
        legs=reports,
        cut=sorted([*cut, *packed.left_out], key=lambda item: -item.score) if explain else [],
        explain=explain,
        ms=elapsed,
        timings=timings,
        profile=fusion_profile.name,
    )


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _fused(
    owner_id: int,
    reports: dict[str, LegReport],
    as_of: datetime,
    profile: FusionProfile,
    query: str,
    query_embedding: Sequence[float] | None,
    *,
    replaying: bool = False,
    timeout: float,
) -> tuple[list[ScoredMemory], list[ScoredMemory]]:
    rankings = {name: report.ranking() for name, report in reports.items() if report.ranked_ids}
    ids = {memory_id for ranked in rankings.values() for memory_id, _ in ranked}
    if query_embedding is None:
        vector_report = reports.get("vector")
        query_embedding = vector_report.query_embedding if vector_report else None
    # The candidates' own vectors serve the semantic gate and the current-state
    # check, which compare meanings; without a query vector neither applies.
    needs_vectors = query_embedding is not None and (
        profile.semantic_gate is not None or profile.current_state
    )
    # Owner and status again: a leg's answer is only a list of ids.
    memories, vectors = load_candidates(
        owner_id, ids, as_of, replaying=replaying, vectors=needs_vectors
    )
    # A question about now may be answered by a memory no leg found: the one
    # that replaced a good candidate (retrieval.fusion._join_successors).
    successors_of = (
        partial(_successors, owner_id, as_of=as_of, replaying=replaying, timeout=timeout)
        if needs_vectors and profile.current_state
        else None
    )
    return fuse(
        rankings,
        memories,
        as_of,
        profile=profile,
        query=query,
        query_embedding=query_embedding,
        vectors=vectors,
        successors_of=successors_of,
    )


def _successors(owner_id: int, olders, *, as_of: datetime, replaying: bool, timeout: float):
    """``load_successors`` under the legs' timeout: a lookup that fails or runs
    late leaves the later memories out (``run_step`` logs why), never the answer."""
    report, found = run_step(
        "successors",
        lambda cursor: load_successors(owner_id, olders, as_of, replaying=replaying),
        timeout,
    )
    return found if report.status == "ok" else ({}, {})


def _raise_if_nothing_searched(reports: dict[str, LegReport]) -> None:
    if any(report.status == "ok" for report in reports.values()):
        return
    failed = {name: report for name, report in reports.items() if report.status in FAILED}
    if failed:
        reasons = "; ".join(
            f"{name}: {report.error or report.status}" for name, report in failed.items()
        )
        raise RecallFailed(f"every retrieval leg failed ({reasons})", legs=dict(reports))


def _mark_retrieved(owner_id: int, packed: Sequence[ScoredMemory]) -> None:
    """Stamp ``last_retrieved_at`` on what went into the block: retrieval is not confirmation.

    A memory stamped less than ``STAMP_GRANULARITY`` ago keeps its stamp: the
    one rule that reads it (archive episodic memories unretrieved for 180
    days) needs nothing finer. The stamps live in their own table
    (``RetrievalStamp``), so writing one leaves the memory's row and its
    indexes alone. The write happens after the answer, on a background thread,
    so it never slows a turn; inside a transaction (or with
    ``STAMP_IN_BACKGROUND`` off, as under test) it happens at once, on the
    caller's connection.
    """
    now = timezone.now()
    stale_before = now - STAMP_GRANULARITY
    due = [
        item.memory
        for item in packed
        if item.memory.last_retrieved_at is None or item.memory.last_retrieved_at < stale_before
    ]
    if not due:
        return
    ids = [memory.pk for memory in due]
    for memory in due:
        RetrievalStamp.attach(memory, now)
    if must_run_inline() or not settings.STAMP_IN_BACKGROUND:
        _stamp(owner_id, ids, now)
    else:
        _stamps.submit(_stamp_in_background, owner_id, ids, now)


def _stamp(owner_id: int, ids: list[int], now: datetime) -> None:
    RetrievalStamp.record(owner_id, ids, now)


def _stamp_in_background(owner_id: int, ids: list[int], now: datetime) -> None:
    try:
        _stamp(owner_id, ids, now)
    except Exception:
        logger.exception("could not stamp last_retrieved_at on %d memories", len(ids))


_stamps = ThreadPool("recall-stamp", 1)


def drain_stamps() -> None:
    """Wait until every stamp queued so far is written (before dropping a database, say)."""
    _stamps.drain()


class _UnavailableProvider:
    """Stands in for a provider that could not be built, so the vector leg reports why."""

    name = "unavailable"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        raise RuntimeError(f"embedding provider unavailable: {self.error}")


def _embedding_provider():
    try:
        from retrieval.embeddings import QueryEmbedder, get_provider

        provider = get_provider()
        return None if provider is None else QueryEmbedder(provider)
    except Exception as error:
        logger.warning("recall without an embedding provider: %s", error)
        return _UnavailableProvider(error)


# --- arguments ------------------------------------------------------------------


def _pipeline(pipeline: str | None) -> str:
    chosen = pipeline or settings.DEFAULT_PIPELINE
    if chosen not in PIPELINES:
        raise ValueError(f"Unknown pipeline {chosen!r}; choose one of: {', '.join(PIPELINES)}.")
    return chosen


def _profile(profile: str | None) -> FusionProfile:
    chosen = profile or settings.RETRIEVAL_PROFILE
    if chosen not in PROFILES:
        raise ValueError(f"Unknown profile {chosen!r}; choose one of: {', '.join(PROFILES)}.")
    return PROFILES[chosen]


def _budget(token_budget: int | None) -> int:
    budget = settings.DEFAULT_TOKEN_BUDGET if token_budget is None else token_budget
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise ValueError("token_budget must be a whole number of tokens.")
    if not 1 <= budget <= settings.MAX_TOKEN_BUDGET:
        raise ValueError(f"token_budget must be between 1 and {settings.MAX_TOKEN_BUDGET}.")
    return budget


def _types(types: Sequence[str] | None) -> tuple[str, ...] | None:
    if types is None:
        return None
    if isinstance(types, str):
        types = [types]
    unknown = [name for name in types if name not in MemoryType.values]
    if unknown:
        raise ValueError(
            f"Unknown memory type {unknown[0]!r}; choose from: {', '.join(MemoryType.values)}."
        )
    # No type named means no filter.
    return tuple(dict.fromkeys(types)) or None


def _legs(legs: Sequence[str] | None) -> tuple[str, ...]:
    if legs is None:
        return LEGS
    if isinstance(legs, str):
        legs = [legs]
    unknown = [name for name in legs if name not in LEGS]
    if unknown:
        raise ValueError(f"Unknown leg {unknown[0]!r}; choose from: {', '.join(LEGS)}.")
    if not legs:
        raise ValueError("legs must name at least one leg.")
    return tuple(dict.fromkeys(legs))


def _as_of(as_of: datetime | None) -> datetime:
    if as_of is None:
        return timezone.now()
    if not isinstance(as_of, datetime):
        raise ValueError("as_of must be a datetime.")
    # A time without a zone is read as UTC, the zone the store keeps.
    return as_of if timezone.is_aware(as_of) else as_of.replace(tzinfo=UTC)


def _embedding(query_embedding: Sequence[float] | None) -> tuple[float, ...] | None:
    if query_embedding is None:
        return None
    try:
        values = tuple(float(value) for value in query_embedding)
    except (TypeError, ValueError):
        raise ValueError("query_embedding must be a list of numbers.")
    if len(values) != settings.EMBEDDING_DIMENSIONS:
        raise ValueError(
            f"query_embedding has {len(values)} dimensions; "
            f"the store uses {settings.EMBEDDING_DIMENSIONS}."
        )
    if not all(math.isfinite(value) for value in values):
        raise ValueError("query_embedding must hold finite numbers.")
    return values
