"""Fusing the legs' lists into one ranking: pure functions.

A profile (retrieval/constants.py) says how: standardised leg scores or the
seed's reciprocal ranks, with or without age decay, a semantic gate on word
matches, current-state preferences and cuts. docs/retrieval.md explains each
step; docs/evaluation.md has the measurements behind every number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import numpy as np

from memories.about import about_of, asked_about, asked_aspect, newer_replaces, same_subject
from memories.models import Memory
from retrieval.constants import (
    ASKED_ASPECT_FACTOR,
    CURRENT_STATE_HALF_LIFE_DAYS,
    CURRENT_STATE_WORDS,
    RRF,
    SUCCESSOR_MIN_SIMILARITY,
    SUPERSEDABLE_TYPES,
    SUPERSEDE_TOP,
    SUPERSEDED_FACTOR,
    TYPE_PROFILES,
    ZSCORE_MIN_REFERENCE,
    FusionProfile,
)
from retrieval.results import ScoredMemory

SECONDS_PER_DAY = 86400.0
BELOW_MIN_SCORE = "below_min_score"
BELOW_RELATIVE_CUT = "below_relative_cut"
# Cut reasons that keep a candidate out of the ranking (as opposed to the budget).
NOT_RETRIEVED = (BELOW_MIN_SCORE, BELOW_RELATIVE_CUT)

# A leg's list, best first: (memory id, the leg's own score).
Ranking = Sequence[tuple[int, float]]
# Given older memories, the store's later memories about the same subject and
# aspect of each (by the older one's id, newest first), and their vectors by id
# (retrieval.candidates.load_successors).
SuccessorsOf = Callable[
    [Sequence[Memory]], tuple[Mapping[int, Sequence[Memory]], Mapping[int, Sequence[float]]]
]

_CURRENT_STATE = re.compile(
    r"\b(?:"
    + "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in CURRENT_STATE_WORDS)
    + r")\b",
    re.IGNORECASE,
)


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


def written_days_ago(memory: Memory, as_of: datetime) -> float:
    return max(0.0, (as_of - memory.created_at).total_seconds() / SECONDS_PER_DAY)


def decay(memory: Memory, as_of: datetime, profile: FusionProfile) -> float:
    """0.5 ** (days since last confirmed / half-life) for the profile's decaying types, else 1."""
    if profile.decay_half_life_days is None or memory.type not in profile.decay_types:
        return 1.0
    return 0.5 ** (age_days(memory, as_of) / profile.decay_half_life_days)


def type_weight(memory_type: str, profile: FusionProfile) -> float:
    return TYPE_PROFILES[memory_type].weight if profile.type_weights else 1.0


def wants_current_state(query: str) -> bool:
    """Whether the query asks how things stand now ("Which phone do I use these days?")."""
    return bool(_CURRENT_STATE.search(query))


def cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    if a is None or b is None:
        return None
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    norm = math.sqrt(a @ a) * math.sqrt(b @ b)
    return float(a @ b) / norm if norm else 0.0


def similarities_to(
    query_embedding: Sequence[float] | None, vectors: Mapping[int, Sequence[float] | None]
) -> dict[int, float | None]:
    """``cosine(query_embedding, vector)`` of each vector (None where either is
    missing), the query converted once: the same numbers, a fraction of the calls."""
    if query_embedding is None:
        return dict.fromkeys(vectors)
    query = np.asarray(query_embedding, dtype=np.float64)
    query_norm = math.sqrt(query @ query)
    found: dict[int, float | None] = {}
    for memory_id, vector in vectors.items():
        if vector is None:
            found[memory_id] = None
            continue
        vector = np.asarray(vector, dtype=np.float64)
        norm = query_norm * math.sqrt(vector @ vector)
        found[memory_id] = float(query @ vector) / norm if norm else 0.0
    return found


def rrf_ranks(rankings: Mapping[str, Ranking]) -> dict[int, dict[str, int]]:
    """For each memory id found by any leg, its 1-based rank in each leg that found it."""
    ranks: dict[int, dict[str, int]] = {}
    for leg, ranked in rankings.items():
        for rank, (memory_id, _) in enumerate(ranked, start=1):
            ranks.setdefault(memory_id, {}).setdefault(leg, rank)
    return ranks


def rrf_shares(leg_ranks: Mapping[str, int], profile: FusionProfile) -> dict[str, float]:
    """Each leg's weight / (k + rank)."""
    weights = profile.leg_weights
    return {leg: weights.get(leg, 1.0) / (profile.rrf_k + rank) for leg, rank in leg_ranks.items()}


def rrf_score(leg_ranks: Mapping[str, int], profile: FusionProfile) -> float:
    """Sum of weight / (k + rank) over the legs: being found twice beats being found once."""
    return sum(rrf_shares(leg_ranks, profile).values())


def standardised(ranked: Ranking, min_reference: int = ZSCORE_MIN_REFERENCE) -> dict[int, float]:
    """Each memory's z-score among the leg's candidates, clipped at 0.

    A short list is measured against at least ``min_reference`` scores, the
    missing ones 0 (what a memory the leg did not find scores): two matches
    out of an owner's many still stand out from the rest. Candidates that all
    score alike stand out from nothing: every z is 0 then.
    """
    scores = [score for _, score in ranked]
    reference = scores + [0.0] * max(0, min_reference - len(scores))
    if len(reference) < 2:
        return {memory_id: 0.0 for memory_id, _ in ranked}
    mean = sum(reference) / len(reference)
    spread = math.sqrt(sum((score - mean) ** 2 for score in reference) / len(reference))
    if spread <= 1e-12:
        return {memory_id: 0.0 for memory_id, _ in ranked}
    z: dict[int, float] = {}
    for memory_id, score in ranked:
        z.setdefault(memory_id, max(0.0, (score - mean) / spread))
    return z


def proportional(ranked: Ranking, z: Mapping[int, float]) -> dict[int, float]:
    """The best candidate keeps its z-score; every other one its share of it,
    in proportion to its own score (for a leg that has no other to be weighed against)."""
    best_id, best_score = ranked[0]
    if best_score <= 0:
        return dict(z)
    scale = z[best_id] / best_score if z[best_id] > 0 else 1.0 / best_score
    return {memory_id: max(0.0, score * scale) for memory_id, score in ranked}


def semantic_gate(similarity: float | None, profile: FusionProfile) -> float:
    """How much a word or entity match counts, by how near the memory's meaning is to the query."""
    if profile.semantic_gate is None or similarity is None:
        return 1.0
    low, high = profile.semantic_gate
    return min(1.0, max(0.0, (similarity - low) / (high - low)))


def fuse(
    rankings: Mapping[str, Ranking],
    memories: Mapping[int, Memory],
    as_of: datetime,
    *,
    profile: FusionProfile,
    query: str = "",
    query_embedding: Sequence[float] | None = None,
    vectors: Mapping[int, Sequence[float]] | None = None,
    successors_of: SuccessorsOf | None = None,
) -> tuple[list[ScoredMemory], list[ScoredMemory]]:
    """Score every candidate; return (kept best first, cut best first).

    Ids missing from ``memories`` (no longer active, or not the owner's, by the
    time they were loaded) are dropped. ``query_embedding``, with the
    candidates' ``vectors`` (by memory id; default: each memory's loaded
    ``embedding``), feeds the semantic gate and the current-state check;
    without it both stand aside. ``successors_of`` lets the current-state check
    bring in the memory that replaces a good candidate when no leg found it.
    """
    rankings = {
        leg: [(memory_id, score) for memory_id, score in ranked if memory_id in memories]
        for leg, ranked in rankings.items()
    }
    ranks = rrf_ranks(rankings)
    z_by_leg = (
        {leg: standardised(ranked) for leg, ranked in rankings.items()}
        if profile.combine != RRF
        else {}
    )
    found = [leg for leg, z in z_by_leg.items() if z and leg != "entity"]
    if len(found) == 1:
        # One scored leg alone (no vectors, say): there is no other leg to weigh
        # it against, so its own scores order everything it found.
        z_by_leg[found[0]] = proportional(rankings[found[0]], z_by_leg[found[0]])
    if vectors is None:
        vectors = {memory_id: _vector(memories[memory_id]) for memory_id in ranks}
    similarities = similarities_to(query_embedding, {m: vectors.get(m) for m in ranks})

    scored: list[ScoredMemory] = []
    for memory_id, leg_ranks in ranks.items():
        memory = memories[memory_id]
        parts: dict = {"ranks": dict(leg_ranks)}
        if profile.combine == RRF:
            relevance = rrf_score(leg_ranks, profile)
            parts["rrf"] = relevance
            parts["contributions"] = rrf_shares(leg_ranks, profile)
        else:
            relevance, contributions, gate = _standardised_relevance(
                memory_id, leg_ranks, z_by_leg, similarities[memory_id], profile
            )
            parts["z"] = {leg: z_by_leg[leg][memory_id] for leg in leg_ranks if leg in z_by_leg}
            parts["contributions"] = contributions
            parts["gate"] = gate
        if similarities[memory_id] is not None:
            parts["similarity"] = similarities[memory_id]
        memory_decay = decay(memory, as_of, profile)
        weight = type_weight(memory.type, profile)
        parts.update(relevance=relevance, decay=memory_decay, weight=weight)
        score = relevance * memory_decay * weight
        scored.append(ScoredMemory(memory=memory, score=score, parts=parts))

    if profile.current_state and wants_current_state(query):
        _prefer_current_state(
            scored,
            vectors if query_embedding is not None else None,
            as_of,
            query,
            profile,
            successors_of=successors_of,
        )
    for item in scored:
        item.parts["final"] = item.score
        # Everything time did to the score, as one factor the inspector shows.
        item.parts["age"] = (
            item.parts["decay"]
            * item.parts.get("current_state", 1.0)
            * item.parts.get("superseded_factor", 1.0)
        )
    scored.sort(key=_best_first)

    best = scored[0].score if scored else 0.0
    kept: list[ScoredMemory] = []
    cut: list[ScoredMemory] = []
    for item in scored:
        if item.score <= profile.min_score:
            item.cut_reason = BELOW_MIN_SCORE
            cut.append(item)
        elif item.score < profile.relative_cut * best:
            item.cut_reason = BELOW_RELATIVE_CUT
            cut.append(item)
        else:
            kept.append(item)
    return kept, cut


def _standardised_relevance(
    memory_id: int,
    leg_ranks: Mapping[str, int],
    z_by_leg: Mapping[str, Mapping[int, float]],
    similarity: float | None,
    profile: FusionProfile,
) -> tuple[float, dict[str, float], float]:
    """Σ weight × z over the legs, the text leg's part gated by meaning (a name
    the query spells out is no coincidence of common words: the entity leg is
    not gated)."""
    gate = semantic_gate(similarity, profile)
    contributions: dict[str, float] = {}
    for leg in leg_ranks:
        weight = profile.leg_weights.get(leg, 1.0)
        part = weight * z_by_leg[leg][memory_id]
        contributions[leg] = part * gate if leg == "text" else part
    return sum(contributions.values()), contributions, gate


def _prefer_current_state(
    scored: list[ScoredMemory],
    vectors: Mapping[int, Sequence[float]] | None,
    as_of: datetime,
    query: str,
    profile: FusionProfile,
    *,
    successors_of: SuccessorsOf | None = None,
) -> None:
    """The query asks how things stand now: a memory that a newer one replaces loses.

    Among the best few candidates, a fact or preference is taken to be out of
    date when a newer candidate is about the same subject and aspect
    (``memories.about.newer_replaces``: "Lives in Lisbon" by "Moved to
    Porto", never by "My brother lives in Porto" nor by "The phone plan costs
    £12"); it drops below the memory that replaces it. The store's later
    memories about what the best candidates are about join the candidates
    (``_join_successors``), for the memory that replaced the one a question
    matched may share none of its words. Then every score leans
    gently towards what was written more recently (a half-life of
    CURRENT_STATE_HALF_LIFE_DAYS), so that of two equally good answers the
    newer wins. A memory about what the query asks of (the asked subject and
    the aspect the query names: "Which town do I live in now?", the owner's
    home) gains ASKED_ASPECT_FACTOR.
    """
    top = sorted(scored, key=_best_first)[:SUPERSEDE_TOP]
    aspect = asked_aspect(query)
    if successors_of is not None and vectors is not None:
        vectors = dict(vectors)
        lenders = [item for item in top if not aspect or about_of(item.memory).aspect == aspect]
        _join_successors(scored, lenders, vectors, as_of, profile, successors_of)
    # What the legs ranked best may replace what is best now: a memory lent its
    # place by an older one (_join_successors) is no sign of a replacement.
    replacing = top
    top = sorted(scored, key=_best_first)[:SUPERSEDE_TOP]
    top += [item for item in replacing if item not in top]
    abouts = {id(item): about_of(item.memory) for item in top}
    for older in top:
        if older.memory.type not in SUPERSEDABLE_TYPES:
            continue
        for newer in sorted(replacing, key=lambda item: -item.memory.created_at.timestamp()):
            if newer is older or newer.memory.created_at <= older.memory.created_at:
                continue
            alike = (
                cosine(vectors.get(older.memory.pk), vectors.get(newer.memory.pk))
                if vectors is not None
                else None
            )
            if newer_replaces(
                abouts[id(older)],
                abouts[id(newer)],
                older.memory.content,
                newer.memory.content,
                similarity=alike,
            ):
                # Replaced for "now": below the memory that replaces it, whatever
                # its relevance, and lower by SUPERSEDED_FACTOR at least.
                demoted = min(older.score * SUPERSEDED_FACTOR, newer.score * SUPERSEDED_FACTOR)
                older.parts["superseded_factor"] = demoted / older.score if older.score else 1.0
                older.score = demoted
                older.parts["superseded_by_newer"] = newer.memory.pk
                older.parts["superseded_about"] = abouts[id(newer)].to_dict()
                break
    # The lean favours newer memories about whom the message asks of ("Where do
    # I live now?": the owner); a memory about someone else gains nothing by
    # being newer (it counts as the oldest candidate).
    asked = asked_about(query)
    leans = {
        id(item): 0.5 ** (written_days_ago(item.memory, as_of) / CURRENT_STATE_HALF_LIFE_DAYS)
        for item in scored
    }
    oldest = min(leans.values(), default=1.0)
    for item in scored:
        about = about_of(item.memory)
        recency = leans[id(item)] if same_subject(about, asked) else oldest
        item.score *= recency
        item.parts["current_state"] = recency
        if aspect and about.aspect == aspect and same_subject(about, asked):
            item.score *= ASKED_ASPECT_FACTOR
            item.parts["asked_aspect"] = aspect
            item.parts["asked_factor"] = ASKED_ASPECT_FACTOR


def _join_successors(
    scored: list[ScoredMemory],
    lenders: list[ScoredMemory],
    vectors: dict[int, Sequence[float]],
    as_of: datetime,
    profile: FusionProfile,
    successors_of: SuccessorsOf,
) -> None:
    """The later memories about what the best candidates are about, as candidates.

    A question about now ("Who is my manager now?") matches the words of the
    memory it has outgrown ("My manager is Hannah …") better than those of the
    one that replaced it ("Reports to Tobi …"). Each fact or preference among
    ``lenders`` (the best candidates; only those about the aspect the question
    names, when it names one: a memory that matched "Where do I live now?" by
    its words about cars lends nothing to a later one about cars) lends its
    relevance, times how alike the two are, to each later memory about the
    same subject and aspect at least SUCCESSOR_MIN_SIMILARITY alike it; a
    memory no leg found joins ``scored`` (and ``vectors``) so. A lent place
    replaces nothing (only what the legs ranked best may replace): a later
    memory about the same aspect is not always a new value of the same fact
    (the salary, then "talks about work with enthusiasm"), so it only
    competes, and wins when the older one's age (the lean below) costs it
    more than their likeness.
    """
    olders = [item for item in lenders if item.memory.type in SUPERSEDABLE_TYPES]
    if not olders:
        return
    found, found_vectors = successors_of([item.memory for item in olders])
    by_id = {item.memory.pk: item for item in scored}
    for older in olders:
        for memory in found.get(older.memory.pk, ()):
            likeness = cosine(vectors.get(older.memory.pk), found_vectors.get(memory.pk))
            if likeness is None or likeness < SUCCESSOR_MIN_SIMILARITY:
                continue
            item = by_id.get(memory.pk)
            if item is None:
                vectors[memory.pk] = found_vectors[memory.pk]
                item = ScoredMemory(
                    memory=memory,
                    score=0.0,
                    parts={
                        "ranks": {},
                        "relevance": 0.0,
                        "decay": decay(memory, as_of, profile),
                        "weight": type_weight(memory.type, profile),
                    },
                )
                scored.append(item)
                by_id[memory.pk] = item
            lent = older.parts["relevance"] * likeness
            if lent > item.parts["relevance"]:
                item.parts.update(
                    relevance=lent, successor_of=older.memory.pk, successor_likeness=likeness
                )
                item.score = lent * item.parts["decay"] * item.parts["weight"]


def _vector(memory: Memory) -> list[float] | None:
    vector = memory.__dict__.get("embedding")
    if vector is None:
        return None
    return [float(value) for value in vector]


def _best_first(item: ScoredMemory) -> tuple[float, int]:
    # Equal scores: the newer memory first (the better guess with nothing else to go on).
    return (-item.score, -item.memory.pk)
