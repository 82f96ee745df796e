"""The retrieval inspector: what recall found and why, in plain words and in numbers.

Everything here reads what ``retrieval.recall.recall`` reports (``ScoredMemory.parts``)
and the tuning constants it used; nothing is scored again. A part this module
does not know (a later pipeline may add some) is still listed, by its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from memories.about import SELF, aspect_label, subject_phrase
from memories.models import Memory
from memories.vocabulary import type_name
from retrieval.constants import (
    ASKED_ASPECT_FACTOR,
    BM25_B,
    BM25_K1,
    BM25_TOP,
    CURRENT_STATE_HALF_LIFE_DAYS,
    FRESHNESS_WEIGHT,
    LEG_LIMIT,
    LEGS,
    PROFILES,
    RELEVANCE_WEIGHT,
    RERANK_TOP,
    RRF,
    SUCCESSOR_MIN_SIMILARITY,
    SUPERSEDE_TOP,
    SUPERSEDED_FACTOR,
    TYPE_PROFILES,
    ZSCORE_MIN_REFERENCE,
    FusionProfile,
)
from retrieval.fusion import reference_time, rrf_shares
from retrieval.legs import entity_candidates
from retrieval.render import BLOCK_CLOSE, BLOCK_OPEN
from retrieval.results import RecallResult, ScoredMemory
from retrieval.tokens import count_tokens

# Parts of ScoredMemory.parts that the sentence and the steps explain; any other
# is listed as it is.
FUSION_PARTS = {
    "ranks",
    "age",
    "superseded_factor",
    "superseded_about",
    "rrf",
    "z",
    "contributions",
    "gate",
    "similarity",
    "relevance",
    "decay",
    "weight",
    "superseded_by_newer",
    "successor_of",
    "successor_likeness",
    "current_state",
    "asked_aspect",
    "asked_factor",
    "final",
}
FRESHNESS_PARTS = {
    "bm25",
    "cosine",
    "relevance",
    "freshness",
    "relevance_norm",
    "freshness_norm",
    "final",
}
# How each fusion leg finds a memory, in the sentence ("Found by meaning and ...").
LEG_PHRASES = {"vector": "by meaning", "text": "by its words", "entity": "by a name it mentions"}
# A re-confirmation this long after creation is worth saying ("re-confirmed 2 days ago").
RECONFIRMED_AFTER = timedelta(days=1)
JUST_NOW = timedelta(minutes=1)


@dataclass
class Segment:
    css: str
    # Left edge and width, in % of the track.
    x: float
    width: float
    title: str


@dataclass
class Bar:
    label: str
    segments: list[Segment]
    value: str


@dataclass
class Candidate:
    item: ScoredMemory
    bars: list[Bar]
    # One plain sentence: how it was found, how old it is, where it went.
    sentence: SafeString = mark_safe("")
    # How the score was made, one visible line per step.
    steps: list[str] = field(default_factory=list)

    @property
    def memory(self) -> Memory:
        return self.item.memory


# --- the bars ---------------------------------------------------------------------


def _width(value: float | None, scale: float) -> float:
    if not value or scale <= 0:
        return 0.0
    return round(max(0.0, min(100.0, 100.0 * value / scale)), 2)


def _stack(pieces: Iterable[tuple[str, float, str]]) -> list[Segment]:
    """Segments laid end to end: (css, width, title) → Segment with its left edge."""
    segments, x = [], 0.0
    for css, width, title in pieces:
        width = min(width, round(100.0 - x, 2))
        segments.append(Segment(css, round(x, 2), max(0.0, width), title))
        x += max(0.0, width)
    return segments


def _leg_parts(parts: dict[str, Any], profile: FusionProfile) -> dict[str, float]:
    """Each leg's part of a memory's relevance, as fusion recorded it (for parts
    recorded without them, what fusion gives for the ranks under ``profile``)."""
    contributions = parts.get("contributions")
    if isinstance(contributions, dict):
        return {leg: _number(value) for leg, value in contributions.items()}
    return rrf_shares(parts.get("ranks") or {}, profile)


def _ordered_legs(ranks: dict[str, int]) -> list[str]:
    return [leg for leg in LEGS if leg in ranks] + sorted(set(ranks) - set(LEGS))


def _about_phrase(subject: str, kind: str, aspect: str) -> str:
    """ "your commute", "your brother · home"."""
    subject = subject_phrase(subject or SELF, kind or SELF)
    aspect = aspect_label(aspect)
    return f"your {aspect}" if subject == "you" and aspect else f"{subject} · {aspect}".strip(" ·")


def replaced_for_now(parts: dict[str, Any]) -> str:
    """ "a newer memory about your commute, #12, replaces it for now"."""
    about = parts.get("superseded_about") or {}
    what = _about_phrase(about.get("subject", ""), about.get("kind", ""), about.get("aspect", ""))
    return f"a newer memory about {what}, #{parts['superseded_by_newer']}, replaces it for now"


def later_than(item: ScoredMemory) -> str:
    """ "as the later memory about your manager than #9" (fusion's successor_of)."""
    memory = item.memory
    what = _about_phrase(memory.about_subject, memory.about_kind, memory.about_aspect)
    return f"as a later memory about {what} than #{item.parts['successor_of']}"


def _age_factor(parts: dict[str, Any]) -> float:
    """Everything time did to a score, as fusion recorded it (``age``): decay, and
    for a current-state question the recency lean and a newer memory about the
    same subject and aspect."""
    if "age" in parts:
        return _number(parts["age"])
    return (
        _number(parts.get("decay", 1.0))
        * _number(parts.get("current_state", 1.0))
        * _number(parts.get("superseded_factor", 1.0))
    )


def _fusion_bars(items: Sequence[ScoredMemory], profile: FusionProfile) -> list[list[Bar]]:
    top_relevance = _top(items, "relevance") or _top(items, "rrf")
    top_final = _top(items, "final")
    top_weight = max([1.0, *(_number(item.parts.get("weight")) for item in items)])
    bars = []
    for item in items:
        parts = item.parts
        ranks = parts.get("ranks") or {}
        leg_parts = _leg_parts(parts, profile)
        relevance_segments = _stack(
            (
                f"bar-{leg}",
                _width(leg_parts.get(leg), top_relevance),
                f"{leg} rank {ranks[leg]}: {leg_parts.get(leg, 0.0):.4f}",
            )
            for leg in _ordered_legs(ranks)
        )
        relevance = parts.get("relevance", parts.get("rrf"))
        bars.append(
            [
                Bar("relevance", relevance_segments, f"{_number(relevance):.4f}"),
                Bar(
                    "× age",
                    _stack([("bar-final", _width(_age_factor(parts), 1.0), "what age did")]),
                    f"{_age_factor(parts):.3f}",
                ),
                Bar(
                    "× type",
                    _stack([("bar-final", _width(parts.get("weight"), top_weight), "type weight")]),
                    f"{_number(parts.get('weight')):.2f}",
                ),
                Bar(
                    "= score",
                    _stack([("bar-relevance", _width(parts.get("final"), top_final), "score")]),
                    f"{_number(parts.get('final')):.4f}",
                ),
            ]
        )
    return bars


def _freshness_bars(items: Sequence[ScoredMemory]) -> list[list[Bar]]:
    top_bm25 = _top(items, "bm25")
    bars = []
    for item in items:
        parts = item.parts
        # Without embeddings the BM25 order stands alone: relevance is the whole score.
        blended = "freshness_norm" in parts
        relevance = (RELEVANCE_WEIGHT if blended else 1.0) * _number(parts.get("relevance_norm"))
        fresh = FRESHNESS_WEIGHT * _number(parts.get("freshness_norm"))
        cosine = parts.get("cosine")
        bars.append(
            [
                Bar(
                    "BM25",
                    _stack([("bar-bm25", _width(parts.get("bm25"), top_bm25), "BM25")]),
                    f"{_number(parts.get('bm25')):.3f}",
                ),
                Bar(
                    "cosine",
                    _stack([("bar-vector", _width(cosine, 1.0), "cosine similarity")]),
                    "—" if cosine is None else f"{cosine:.3f}",
                ),
                Bar(
                    "freshness",
                    _stack([("bar-freshness", _width(parts.get("freshness"), 1.0), "freshness")]),
                    f"{_number(parts.get('freshness')):.3f}",
                ),
                Bar(
                    "= score",
                    _stack(
                        [
                            (
                                "bar-relevance",
                                _width(relevance, 1.0),
                                (f"{RELEVANCE_WEIGHT:g} × " if blended else "")
                                + f"relevance {relevance:.3f}",
                            ),
                            (
                                "bar-freshness",
                                _width(fresh, 1.0),
                                f"{FRESHNESS_WEIGHT:g} × freshness {fresh:.3f}",
                            ),
                        ]
                    ),
                    f"{_number(parts.get('final')):.3f}",
                ),
            ]
        )
    return bars


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _top(items: Sequence[ScoredMemory], part: str) -> float:
    return max((_number(item.parts.get(part)) for item in items), default=0.0)


def score_bars(
    pipeline: str, items: Sequence[ScoredMemory], profile: str = "default"
) -> list[Candidate]:
    """Candidates with their score bars only (no sentence: that needs the database)."""
    if pipeline == "fusion":
        bars = _fusion_bars(items, PROFILES[profile])
    else:
        bars = _freshness_bars(items)
    return [Candidate(item, item_bars) for item, item_bars in zip(items, bars, strict=True)]


# --- the sentence and the steps ------------------------------------------------------


@dataclass
class Evidence:
    """What ties a memory to the message, for the sentence."""

    # The message's words that share an English stem with the memory, as typed.
    words: list[str] = field(default_factory=list)
    # The memory's entities that the message names.
    names: list[str] = field(default_factory=list)


def _message_words(query: str) -> list[tuple[str, set[str]]]:
    """Each word of the message with its English lexemes, as PostgreSQL reads them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT token, lexemes FROM ts_debug('english', %s) WHERE cardinality(lexemes) > 0",
            [query],
        )
        return [(token, set(lexemes)) for token, lexemes in cursor.fetchall()]


def _memory_lexemes(ids: Sequence[int]) -> dict[int, set[str]]:
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, tsvector_to_array(tsv) FROM {Memory._meta.db_table} WHERE id = ANY(%s)",
            [list(ids)],
        )
        return {memory_id: set(lexemes) for memory_id, lexemes in cursor.fetchall()}


def evidence(query: str, memories: Sequence[Memory]) -> dict[int, Evidence]:
    """For each memory, the message's words and names that it shares."""
    words = _message_words(query)
    lexemes = _memory_lexemes([memory.pk for memory in memories])
    named = {candidate.casefold() for candidate in entity_candidates(query)}
    found = {}
    for memory in memories:
        shared: dict[str, str] = {}
        for token, token_lexemes in words:
            if token_lexemes & lexemes.get(memory.pk, set()):
                shared.setdefault(token.casefold(), token)
        found[memory.pk] = Evidence(
            words=list(shared.values()),
            names=[name for name in memory.entity_refs if name.casefold() in named],
        )
    return found


def _quoted(values: Sequence[str]) -> SafeString:
    """'<bdi>a</bdi>, <bdi>b</bdi> and <bdi>c</bdi>' (bdi: the words may be right-to-left)."""
    pieces = [format_html("<em><bdi>{}</bdi></em>", value) for value in values]
    if len(pieces) <= 1:
        return mark_safe("".join(pieces))
    return mark_safe(", ".join(pieces[:-1]) + " and " + pieces[-1])


def _join(phrases: Sequence[SafeString | str]) -> SafeString:
    """'A and B'; 'A, B, and C' (also for two when the first has an "and" of its own)."""
    phrases = [format_html("{}", phrase) for phrase in phrases]
    if len(phrases) <= 1:
        return mark_safe("".join(phrases))
    if len(phrases) == 2 and " and " not in phrases[0]:
        return mark_safe(f"{phrases[0]} and {phrases[1]}")
    return mark_safe(", ".join(phrases[:-1]) + ", and " + phrases[-1])


def _found_by_leg(leg: str, found: Evidence) -> SafeString | str:
    if leg == "text" and found.words:
        noun = "word" if len(found.words) == 1 else "words"
        return format_html("by the {} {}", noun, _quoted(found.words))
    if leg == "entity" and found.names:
        noun = "name" if len(found.names) == 1 else "names"
        return format_html("by the {} {}", noun, _quoted(found.names))
    return LEG_PHRASES.get(leg, f"by the {leg} search")


def _found(pipeline: str, item: ScoredMemory, found: Evidence) -> SafeString | str:
    parts = item.parts
    if pipeline == "fusion":
        ranks = parts.get("ranks") or {}
        later = [later_than(item)] if "successor_of" in parts else []
        if not ranks:
            return format_html("Found {}", later[0]) if later else "Found"
        if "entity" in ranks and found.names:
            # A name the entity leg found is said once, as a name.
            names = {name.casefold() for name in found.names}
            words = [word for word in found.words if word.casefold() not in names]
            found = Evidence(words=words or found.words, names=found.names)
        return format_html(
            "Found {}",
            _join([*(_found_by_leg(leg, found) for leg in _ordered_legs(ranks)), *later]),
        )
    by_words = _found_by_leg("text", found)
    if parts.get("cosine") is not None:
        return format_html("Found {}, then ranked by meaning", by_words)
    return format_html("Found {}", by_words)


def _age(memory: Memory, as_of: datetime) -> str:
    since = reference_time(memory, as_of)
    if as_of - since < JUST_NOW:
        return "new"
    age = timesince(since, as_of, depth=1)
    confirmed = memory.last_confirmed_at
    if (
        confirmed is not None
        and since == confirmed
        and confirmed - memory.created_at > (RECONFIRMED_AFTER)
    ):
        return f"re-confirmed {age} ago"
    return f"{age} old"


def _age_effect(pipeline: str, item: ScoredMemory) -> str:
    parts = item.parts
    if pipeline == "fusion":
        if "superseded_by_newer" in parts:
            return replaced_for_now(parts)
        if isinstance(parts.get("current_state"), int | float):
            return f"counts {_age_factor(parts):.0%}: the message asks how things stand now"
        if not isinstance(parts.get("decay"), int | float):
            return ""
        if parts["decay"] < 1.0:
            return f"counts {parts['decay']:.0%}"
        return "its age does not lower it"
    if isinstance(parts.get("freshness"), int | float):
        return f"freshness {parts['freshness']:.0%}"
    return ""


def _outcome(item: ScoredMemory, packed: int) -> str:
    if item.cut_reason == "below_min_score":
        return "left out: it stood out in no search"
    if item.cut_reason == "below_relative_cut":
        return "left out: far below the best match"
    if item.cut_reason == "past_falloff":
        return "left out: the block ends where the scores fall off"
    if item.cut_reason == "over_budget":
        return "left out: no room left in the token budget"
    if item.cut_reason:
        return f"left out: {item.cut_reason.replace('_', ' ')}"
    shortened = ", cut short to fit" if item.shortened is not None else ""
    if item.position is not None:
        return f"in the block at position {item.position + 1} of {packed}{shortened}"
    return "in the block" + shortened


def sentence(
    pipeline: str, item: ScoredMemory, found: Evidence, as_of: datetime, packed: int
) -> SafeString:
    """'Found by meaning and by the word *coffee*; 3 months old (counts 79 %); in the block
    at position 2 of 5.'"""
    age = _age(item.memory, as_of)
    effect = _age_effect(pipeline, item)
    if effect:
        age = f"{age} ({effect})"
    return format_html("{}; {}; {}.", _found(pipeline, item, found), age, _outcome(item, packed))


def _fusion_steps(item: ScoredMemory, profile: FusionProfile) -> list[str]:
    parts = item.parts
    ranks = parts.get("ranks") or {}
    steps = []
    if profile.combine == RRF:
        recorded = isinstance(parts.get("contributions"), dict)
        shares = _leg_parts(parts, profile)
        rrf = parts.get("rrf")
        # The arithmetic is shown only when this profile's constants give the
        # shares fusion recorded and they add up to its score (a recall tuned
        # differently is shown by its recorded shares, or by rank alone).
        shown = (
            isinstance(rrf, int | float)
            and abs(sum(shares.values()) - rrf) <= 1e-9 * max(1.0, rrf)
            and all(
                abs(rrf_shares({leg: rank}, profile)[leg] - shares.get(leg, 0.0)) <= 1e-12
                for leg, rank in ranks.items()
            )
        )
        for leg in _ordered_legs(ranks):
            rank = ranks[leg]
            if shown:
                weight = profile.leg_weights.get(leg, 1.0)
                steps.append(
                    f"{leg} leg: rank {rank} → {weight:g} ÷ ({profile.rrf_k:g} + {rank})"
                    f" = {shares[leg]:.3f}"
                )
            elif recorded:
                steps.append(f"{leg} leg: rank {rank} → {shares.get(leg, 0.0):.3f}")
            else:
                steps.append(f"{leg} leg: rank {rank}")
    else:
        z = parts.get("z") or {}
        contributions = parts.get("contributions") or {}
        gate = parts.get("gate")
        for leg in _ordered_legs(ranks):
            part = _number(contributions.get(leg))
            if leg == "entity":
                steps.append(f"entity leg: rank {ranks[leg]} → + {part:.2f}")
            elif leg == "text" and isinstance(gate, int | float) and gate < 1.0:
                steps.append(
                    f"text leg: rank {ranks[leg]}, stands out by {_number(z.get(leg)):.2f}"
                    f" × meaning gate {gate:.2f} → {part:.2f}"
                )
            else:
                steps.append(
                    f"{leg} leg: rank {ranks[leg]}, stands out by {_number(z.get(leg)):.2f}"
                    f" → {part:.2f}"
                )
    if "successor_of" in parts:
        steps.append(
            f"found {later_than(item)}: #{parts['successor_of']}'s relevance"
            f" × likeness {_number(parts.get('successor_likeness')):.2f}"
            f" → {_number(parts.get('relevance')):.2f}"
        )
    if "superseded_by_newer" in parts:
        steps.append(
            f"{replaced_for_now(parts)} → below it,"
            f" × {_number(parts.get('superseded_factor', SUPERSEDED_FACTOR)):.2f}"
        )
    if isinstance(parts.get("current_state"), int | float):
        steps.append(
            f"asked how things stand now: newer counts more → × {parts['current_state']:.2f}"
        )
    asked = isinstance(parts.get("asked_factor"), int | float)
    if asked:
        steps.append(
            f"about what was asked ({parts.get('asked_aspect', '')}) → × {parts['asked_factor']:g}"
        )
    if {"decay", "weight", "final"} <= set(parts):
        relevance = parts.get("relevance", parts.get("rrf"))
        steps.append(
            f"{_number(relevance):.3f} × age {_age_factor(parts):.2f}"
            f" × type {_number(parts['weight']):g}"
            + (f" × asked {parts['asked_factor']:g}" if asked else "")
            + f" = {_number(parts['final']):.4f}"
        )
    return steps + _other_parts(parts, FUSION_PARTS)


def _freshness_steps(item: ScoredMemory) -> list[str]:
    parts = item.parts
    steps = []
    if "bm25" in parts:
        steps.append(f"BM25 {_number(parts['bm25']):.2f}")
    if parts.get("cosine") is not None:
        steps.append(f"similarity to the message {_number(parts['cosine']):.2f}")
    elif "cosine" in parts:
        steps.append("no similarity: the BM25 order stands")
    if "freshness" in parts:
        profile = TYPE_PROFILES.get(item.memory.type)
        half_life = f" (half-life {profile.half_life_days:g} days)" if profile else ""
        steps.append(f"freshness {_number(parts['freshness']):.2f}{half_life}")
    if {"relevance_norm", "freshness_norm", "final"} <= set(parts):
        steps.append(
            f"{RELEVANCE_WEIGHT:g} × relevance {_number(parts['relevance_norm']):.2f}"
            f" + {FRESHNESS_WEIGHT:g} × freshness {_number(parts['freshness_norm']):.2f}"
            f" = {_number(parts['final']):.3f}"
        )
    return steps + _other_parts(parts, FRESHNESS_PARTS)


def _other_parts(parts: dict[str, Any], known: set[str]) -> list[str]:
    steps = []
    for name in sorted(set(parts) - known):
        value = parts[name]
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        steps.append(f"{name.replace('_', ' ')}: {shown}")
    return steps


def explain(result: RecallResult) -> list[Candidate]:
    """Every candidate of a recall (packed first, then what was cut), explained."""
    items = [*result.memories, *result.cut]
    candidates = score_bars(result.pipeline, items, result.profile)
    found = evidence(result.query, [item.memory for item in items])
    profile = PROFILES[result.profile]
    packed = len(result.memories)
    for candidate in candidates:
        item = candidate.item
        candidate.sentence = sentence(
            result.pipeline, item, found[item.memory.pk], result.as_of, packed
        )
        candidate.steps = (
            _fusion_steps(item, profile) if result.pipeline == "fusion" else _freshness_steps(item)
        )
    return candidates


# --- the legend and the block ----------------------------------------------------------


@dataclass
class LegendEntry:
    term: str
    text: str
    formula: str = ""


def _type_list(value) -> str:
    return ", ".join(
        f"{type_name(memory_type)} {value(profile)}"
        for memory_type, profile in TYPE_PROFILES.items()
    )


def legend(pipeline: str, profile_name: str = "default") -> list[LegendEntry]:
    """How the pipeline scores, with the numbers in force (read from retrieval.constants)."""
    if pipeline == "fusion":
        profile = PROFILES[profile_name]
        legs = LegendEntry(
            "Legs",
            f"Each leg ranks up to {LEG_LIMIT} memories: vector by meaning (embeddings), "
            "text by shared words (BM25"
            + (", ts_rank under this profile" if profile.text_ranker == "ts_rank" else "")
            + "), entity by the names the message mentions.",
        )
        if profile.combine == RRF:
            weights = ", ".join(f"{leg} {profile.leg_weights.get(leg, 1.0):g}" for leg in LEGS)
            half_life = profile.decay_half_life_days
            return [
                LegendEntry("Profile", f"“{profile.name}”: seed 000's configuration."),
                legs,
                LegendEntry(
                    "Score",
                    f"k = {profile.rrf_k:g}; leg weights: {weights}.",
                    "Σ leg weight ÷ (k + rank) × age × type weight",
                ),
                LegendEntry(
                    "Age",
                    f"Halves every {half_life:g} days since the memory was last confirmed.",
                    f"0.5 ^ (days ÷ {half_life:g})",
                ),
                LegendEntry(
                    "Type weight", _type_list(lambda type_profile: f"{type_profile.weight:g}") + "."
                ),
                LegendEntry("Cut", f"A score of {profile.min_score:g} or below is left out."),
            ]
        low, high = profile.semantic_gate or (0.0, 0.0)
        entries = [
            LegendEntry("Profile", f"“{profile.name}”: measured best on every dev set."),
            legs,
            LegendEntry(
                "Stands out",
                "Each leg's scores become z-scores over its own list (how far above the "
                f"list's mean, in spreads; a list shorter than {ZSCORE_MIN_REFERENCE} "
                "counts the missing places as 0); below the mean counts 0.",
                "z = (score − mean) ÷ spread",
            ),
            LegendEntry(
                "Score",
                f"vector z × {profile.leg_weights.get('vector', 1.0):g} + text z × "
                f"{profile.leg_weights.get('text', 1.0):g} × meaning gate + "
                f"{profile.leg_weights.get('entity', 1.0):g} when a name matches.",
                "Σ leg parts × age",
            ),
        ]
        if profile.semantic_gate is not None:
            entries.append(
                LegendEntry(
                    "Meaning gate",
                    "A word match counts fully when the memory's meaning is close to the "
                    f"message's (similarity {high:g} or more) and not at all below {low:g}.",
                    f"clip((similarity − {low:g}) ÷ {high - low:g}, 0, 1)",
                )
            )
        entries.append(
            LegendEntry(
                "Age",
                "Age alone lowers nothing: an old fact nobody contradicted is still true."
                + (
                    " When the message asks how things stand now, a fact or preference "
                    f"among the best {SUPERSEDE_TOP} that a newer one replaces (about the "
                    "same subject and aspect: your home, your brother's job) drops below it, "
                    f"× {SUPERSEDED_FACTOR:g} at least; nothing about another subject or "
                    "aspect does that; a later memory about the same subject and aspect "
                    "as one of those, at least "
                    f"{SUCCESSOR_MIN_SIMILARITY:g} alike it, joins even if no search found "
                    "it, with that one's relevance × their likeness (“Who is my manager "
                    "now?” matches the old manager's memory; the new one names another "
                    "person); newer memories count a little more; and a memory "
                    "about the aspect the message asks of (your home, for “Which town "
                    f"do I live in now?”) counts × {ASKED_ASPECT_FACTOR:g}."
                    if profile.current_state
                    else ""
                ),
                f"0.5 ^ (days since written ÷ {CURRENT_STATE_HALF_LIFE_DAYS:g})"
                if profile.current_state
                else "",
            )
        )
        entries.append(
            LegendEntry(
                "Cut",
                f"A score of {profile.min_score:g} is left out"
                + (
                    f", and so is anything under {profile.relative_cut:.0%} of the best"
                    if profile.relative_cut
                    else ""
                )
                + (
                    "; the block ends where the scores fall off, under "
                    f"{profile.block_falloff:.0%} of the best, and holds at most "
                    f"{profile.block_max_memories} memories"
                    if profile.block_falloff and profile.block_max_memories
                    else ""
                )
                + (
                    f"; no memory takes more than {profile.max_item_share:.0%} of the budget "
                    "(a longer one is cut short)."
                    if profile.max_item_share
                    else "."
                ),
            )
        )
        return entries
    return [
        LegendEntry(
            "1. BM25",
            f"The {BM25_TOP} memories sharing the most telling words with the message "
            f"(k1 = {BM25_K1:g}, b = {BM25_B:g}).",
        ),
        LegendEntry(
            "2. Rerank",
            f"Of those, the {RERANK_TOP} closest in meaning (cosine similarity of embeddings); "
            "without embeddings the BM25 order stays.",
        ),
        LegendEntry(
            "3. Blend",
            "Relevance and freshness are each scaled to 0–1 across the candidates. Freshness "
            "halves every half-life: "
            + _type_list(lambda profile: f"{profile.half_life_days:g} days")
            + ".",
            f"{RELEVANCE_WEIGHT:g} × relevance + {FRESHNESS_WEIGHT:g} × freshness",
        ),
    ]


@dataclass
class BlockCost:
    budget: int
    total: int
    # The fence (opening tag, preamble, closing tag): the same whatever is packed.
    fence: int
    memories: int
    unused: int
    fence_width: float
    memories_width: float


def block_cost(result: RecallResult) -> BlockCost:
    fence = count_tokens(BLOCK_OPEN + BLOCK_CLOSE) if result.block else 0
    memories = max(0, result.block_tokens - fence)
    budget = result.token_budget
    return BlockCost(
        budget=budget,
        total=result.block_tokens,
        fence=fence,
        memories=memories,
        unused=max(0, budget - result.block_tokens),
        fence_width=_width(fence, budget),
        memories_width=min(_width(memories, budget), round(100.0 - _width(fence, budget), 2)),
    )
