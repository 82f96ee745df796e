"""Which of the owner's memories a new fact repeats or updates.

For a text (a proposal, a remembered fact, an extracted fact) the owner's
closest active memories are gathered the ways retrieval finds memories: the
nearest stored embeddings, shared entities, shared English lexemes (the
postings the text and entity legs read). Each candidate is then classified:

- **duplicate**: the same meaning, nothing new (confirming both would store it
  twice);
- **update**: the same subject with a different value, or more detail ("Prefers
  a window seat" against "Prefers an aisle seat"): the new fact should become a
  new version of the old one;
- unrelated: dropped.

The classifier reads a few signals of a pair (``PairSignals``): the cosine of
the embeddings, the overlap of lexemes, shared entities, whether each side
holds a value the other lacks (a number, a date, a name) and whether the new
text says something changed ("now", "no longer", "switched"). Its thresholds
are the constants below, chosen on the labelled pairs in
``tests/memories/data/related-pairs.json`` with ``manage.py related_eval``
(docs/review.md has the figures). "duplicate" is kept strict, because
extraction drops a fact it calls a duplicate; a pair the classifier is unsure
about is called an update, which only asks the owner to look.

Without an embedding provider (or when embedding fails or times out) it
compares by entities and words only, and says so in ``RelatedResult.degraded``.
Everything is bounded in time: a slow database or model gives a degraded or an
empty answer, never a slow create or page.
"""

from __future__ import annotations

import json
import logging
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from memories.about import (
    MONTHS,
    ROLE_CANONICAL,
    ROLE_WORDS,
    About,
    aspect_label,
    derive_about,
    is_multi_valued,
    refined,
    same_occasion,
    same_subject,
    topic_of,
)
from memories.models import Memory, owner_reading
from memories.vectors import vector_text
from retrieval.embeddings import (
    MODEL_LOADING,
    EmbeddingError,
    embedding_space,
    get_provider,
    model_loading,
)
from retrieval.legs import nearest_active, run_step
from retrieval.lexemes import clean_query
from retrieval.models import Posting

logger = logging.getLogger(__name__)

DUPLICATE = "duplicate"
UPDATE = "update"
# Close, but not the same fact nor a version of it (another person, another
# occasion, another aspect, another object): shown for reference, never with
# an action that replaces or rejects.
SEE_ALSO = "see_also"

# --- thresholds (chosen on the dev split of the labelled pairs; docs/review.md) ---

# With embeddings: a pair this close, with no conflicting value and no sign of
# a change, says the same thing.
DUPLICATE_MIN_COSINE = 0.80
# A pair this close is about the same subject: an update unless a duplicate.
UPDATE_MIN_COSINE = 0.65
# ... and this close when the new text holds a conflicting value or says that
# something changed ("moved to Berlin" against "lives in Lisbon").
UPDATE_MIN_COSINE_CHANGED = 0.50
# Without embeddings: lexeme overlap (Jaccard) of a duplicate and of an update,
# and of an update that also shares a named entity.
DUPLICATE_MIN_LEXICAL = 0.50
UPDATE_MIN_LEXICAL = 0.20
UPDATE_MIN_LEXICAL_WITH_ENTITY = 0.25
# ... and, without a shared entity, at least this many lexemes in common.
UPDATE_MIN_SHARED_LEXEMES = 2

# With embeddings, a pair about the same subject and aspect this close, with no
# value that conflicts and no sign of a change, says the same thing however
# worded (a paraphrase with no word in common is about 0.6 to 0.8 alike).
ABOUT_DUPLICATE_MIN_COSINE = 0.62
# A pair whose texts differ in one or two words only ("an aisle seat" / "a
# window seat") swaps a value unless it is this close (a synonym swapped).
SUBSTITUTION_DUPLICATE_MIN_COSINE = 0.93
# When either side's aspect is unknown, only pairs this close are judged at all.
UNKNOWN_ASPECT_MIN_COSINE = 0.72
# A pair about the same subject and aspect of several values ("allergic to
# penicillin" / "allergic to cats") is about one object when they share a
# content word or a value, or are this close.
SAME_OBJECT_MIN_COSINE = 0.85
# A pair about one subject this close, sharing an object, is one fact even
# when the two were given different aspects.
SAME_FACT_MIN_COSINE = 0.88
# A near pair reported as "see also": this close, or sharing a named entity.
SEE_ALSO_MIN_COSINE = 0.60
SEE_ALSO_MIN_LEXICAL = 0.40
MAX_SEE_ALSO = 3

# --- search bounds ---

# Candidates taken from each source (nearest vectors, shared entities, shared
# lexemes); the classifier sees their union.
CANDIDATES_PER_SOURCE = 8
# At most this many related memories are returned, best first.
MAX_RELATED = 5
# Seconds the text's embedding may take, and the database query. A create
# waits for both at most; past them it answers with what it has.
EMBED_TIMEOUT_SECONDS = 1.0
QUERY_TIMEOUT_SECONDS = 1.0

NO_PROVIDER = "no embedding provider: compared by entities and words only"
EMBEDDING_FAILED = "the embedding failed or timed out: compared by entities and words only"
QUERY_FAILED = "the search for related memories failed or timed out"
MODEL_STILL_LOADING = f"{MODEL_LOADING}: compared by entities and words only"

MEMORY_TABLE = Memory._meta.db_table
POSTING_TABLE = Posting._meta.db_table


# --- the signals of a pair --------------------------------------------------------

NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}
ORDINAL_WORDS = {
    word: str(value)
    for value, word in enumerate(
        [
            "first",
            "second",
            "third",
            "fourth",
            "fifth",
            "sixth",
            "seventh",
            "eighth",
            "ninth",
            "tenth",
            "eleventh",
            "twelfth",
        ],
        start=1,
    )
}
_DIGIT_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
# Words that say the new text changes what was true before.
CHANGE_MARKERS = {
    "now",
    "anymore",
    "longer",  # "no longer"
    "again",
    "switched",
    "switch",
    "moved",
    "new",
    "stopped",
    "quit",
    "gave",  # "gave up"
    "given",  # "has given up"
    "left",
    "cancelled",
    "canceled",
    "sold",
    "divorced",
    "split",
    "become",
    "became",
    "instead",
    "changed",
    "started",
}
_WORD = re.compile(r"[\w@+][\w@+.,:'’/-]*[\w]|[\w@+]")
_SENTENCE_BREAK = re.compile(r"[.;!?]")


def normalized_text(text: str) -> str:
    """Lower case, one space between words, no closing punctuation."""
    return re.sub(r"[\s.!?;,]+$", "", " ".join(text.split()).lower())


def _value_token(word: str) -> str:
    word = word.lower().removesuffix("'s").removesuffix("’s").strip(".,:'’")
    word = NUMBER_WORDS.get(word) or ORDINAL_WORDS.get(word) or word
    # "7th" and "seventh" name one value.
    word = _DIGIT_ORDINAL.sub(r"\1", word)
    # "Fridays" and "Friday", "kids" and "kid" name the same value.
    if word.isalpha() and len(word) > 3 and word.endswith("s"):
        word = word[:-1]
    return word


def value_tokens(text: str, entities: Iterable[str] = ()) -> set[str]:
    """What a fact's value is made of: numbers, dates, names, addresses.

    Numbers (digits or number words), words with a capital letter that do not
    merely start a sentence, e-mail addresses, and the words of the named
    entities.
    """
    values = set(_text_values(text))
    for entity in entities:
        values.update(_value_token(word) for word in entity.split())
    values.discard("")
    return values


# A candidate memory meets many probes on a queue page: read each text once.
@lru_cache(maxsize=4096)
def _text_values(text: str) -> frozenset[str]:
    values: set[str] = set()
    previous_end = 0
    for index, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        # The first word, or one after a full stop, starts a sentence.
        starts = index == 0 or bool(_SENTENCE_BREAK.search(text[previous_end : match.start()]))
        previous_end = match.end()
        lower = word.lower()
        if (
            not word.isalpha()
            and (any(char.isdigit() for char in word) or "@" in word)
            or lower in NUMBER_WORDS
            or lower in ORDINAL_WORDS
            or (word[0].isupper() and not starts)
            or not word[1:].islower()
            and any(char.isupper() for char in word[1:])
        ):
            values.add(_value_token(word))
    return frozenset(values)


@lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    return frozenset(word.lower().replace("’", "'") for word in re.findall(r"[\w'’]+", text))


def says_changed(old: str, new: str) -> bool:
    """The new text marks a change ("now", "no longer", "moved") that the old one does not."""
    return bool((_words(new) - _words(old)) & CHANGE_MARKERS)


def relatives(text: str) -> set[str]:
    """The people a fact names by their relation to the owner (``ROLE_WORDS``,
    one spelling each: "his mum's" counts as "mother"). A fact about the
    owner's mother is not an update of one about the owner, nor one about his
    son of one about his daughter."""
    words = {word.removesuffix("'s") for word in _words(text)}
    return {ROLE_CANONICAL.get(word, word) for word in words if word in ROLE_WORDS}


def about_someone_else(
    old: str, new: str, old_entities: Iterable[str], new_entities: Iterable[str]
) -> bool:
    """The two facts are about different people: "his mother" against "his father",
    or a relative on one side only when no entity is shared ("is 34" against "his
    wife is 36"; but "his wife is Leila" against "divorced Leila" is one subject)."""
    old_people, new_people = relatives(old), relatives(new)
    if old_people and new_people:
        return old_people != new_people
    if old_people == new_people:
        return False
    shared = {e.casefold() for e in old_entities} & {e.casefold() for e in new_entities}
    return not shared


@dataclass(frozen=True)
class PairSignals:
    """What the classifier reads about one (existing, new) pair."""

    # Cosine similarity of the two embeddings; None without them.
    cosine: float | None
    # Jaccard overlap of the two texts' English lexemes.
    lexical: float
    shared_lexemes: int
    shared_entities: int
    # Each side holds a value (number, date, name) that the other lacks.
    value_conflict: bool
    # The new text says something changed.
    changed: bool
    # The new text keeps every lexeme of the old one and adds some (more detail).
    adds_detail: bool
    # Each side has lexemes the other lacks: a word was replaced.
    replaces_words: bool
    # The facts are about different people (the owner's mother, his son, ...).
    other_person: bool
    # Equal once case, spacing and closing punctuation are set aside.
    same_text: bool
    # What each side is about (memories/about.py), and what follows from it.
    old_about: About | None = None
    new_about: About | None = None
    same_subject: bool = True
    # None: either side's aspect is unknown.
    same_aspect: bool | None = None
    # Events only: None when either occasion is unknown or a side is no event.
    same_occasion: bool | None = None
    # The aspect holds several values at once (allergies, hobbies, trips).
    multi_valued: bool = False
    # The two sides name one object: a shared content word or value.
    shared_object: bool = False
    # The texts differ in a word or two only: a value swapped in one frame.
    substitution: bool = False
    disjoint: bool = False
    # The words swapped include an opening word on each side: the verb of
    # the sentence reworded, not a value.
    frame_swap: bool = False
    # A value (name, number, date) both name.
    shared_value: bool = False
    # Both are events, on a date each text names, and the dates differ in the day.
    redated: bool = False
    # Both memories are events (episodic); both of one type.
    both_events: bool = False
    same_type: bool = True
    # The new text names a value (name, number, date) the old one lacks, and
    # the old one a value the new one lacks (both: ``value_conflict``).
    new_value: bool = False
    old_value: bool = False
    # What one side prefers or does, the other sets against it ("Prefers soba
    # to udon" / "Prefers udon to soba"; "Drives to work" / "Cycles instead
    # of driving"): a choice reversed.
    reversed_choice: bool = False
    # Each side names where, and the places have nothing in common: "Arjun's
    # wedding in Bangalore" / "… in Mysore" (not "at Tampere Hall" / "in
    # Tampere-talo", one place named two ways).
    place_replaced: bool = False

    @property
    def why(self) -> str:
        """Why the pair is or is not related, in the owner's words."""
        if self.old_about is None or self.new_about is None:
            return ""
        if not self.same_subject:
            return f"about {self.new_about.subject_phrase}, not {self.old_about.subject_phrase}"
        if self.same_aspect is False:
            return (
                f"about {aspect_label(self.new_about.aspect) or 'something else'}, "
                f"not {aspect_label(self.old_about.aspect) or 'the same'}"
            )
        if self.same_occasion is False:
            return "another occasion"
        if self.multi_valued and not self.shared_object:
            return "another one of several"
        return ""

    @classmethod
    def of(
        cls,
        *,
        old_text: str,
        new_text: str,
        old_lexemes: Iterable[str],
        new_lexemes: Iterable[str],
        old_entities: Iterable[str] = (),
        new_entities: Iterable[str] = (),
        cosine: float | None = None,
        old_about: About | None = None,
        new_about: About | None = None,
        old_type: str = "",
        new_type: str = "",
    ) -> PairSignals:
        old_entities, new_entities = tuple(old_entities), tuple(new_entities)
        old_lex, new_lex = set(old_lexemes), set(new_lexemes)
        union = old_lex | new_lex
        old_values = value_tokens(old_text, old_entities)
        new_values = value_tokens(new_text, new_entities)
        if old_about is not None and new_about is not None:
            # "U of T" names no value "University of Toronto" lacks; "English-to-Czech"
            # holds "English" and "Czech".
            old_values, new_values = _plain_values(old_values), _plain_values(new_values)
        judged = _about_signals(
            old_text,
            new_text,
            old_lex,
            new_lex,
            old_values,
            new_values,
            old_about,
            new_about,
            old_type,
            new_type,
        )
        return cls(
            **judged,
            new_value=_values_only_in(new_values, old_values),
            old_value=_values_only_in(old_values, new_values),
            reversed_choice=reversed_choice(old_text, new_text),
            place_replaced=place_replaced(old_text, new_text),
            cosine=None if cosine is None or not math.isfinite(cosine) else float(cosine),
            lexical=len(old_lex & new_lex) / len(union) if union else 0.0,
            shared_lexemes=len(old_lex & new_lex),
            shared_entities=len(
                {e.casefold() for e in old_entities} & {e.casefold() for e in new_entities}
            ),
            value_conflict=bool(old_values - new_values) and bool(new_values - old_values),
            changed=says_changed(old_text, new_text)
            or (old_about is not None and bool(_CORRECTION.search(new_text))),
            adds_detail=bool(old_lex) and old_lex < new_lex,
            replaces_words=bool(old_lex - new_lex) and bool(new_lex - old_lex),
            other_person=about_someone_else(old_text, new_text, old_entities, new_entities),
            same_text=normalized_text(old_text) == normalized_text(new_text),
        )


_PLACE = re.compile(r"\b(?:in|at)\s+(?:the\s+)?([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)")


def _place_stems(text: str) -> set[str]:
    return {
        word.casefold()[:5]
        for place in _PLACE.findall(text)
        for word in re.split(r"[\s-]+", place)
        if word and word.casefold().rstrip(".") not in MONTHS
    }


def place_replaced(old_text: str, new_text: str) -> bool:
    """Each text names where (after *in* or *at*), and no word of one place
    begins as a word of the other does."""
    old, new = _place_stems(old_text), _place_stems(new_text)
    return bool(old) and bool(new) and not old & new


# Lexemes that carry no object: the frame of a fact, not what it is about.
_FRAME_LEXEMES = frozenset(
    [
        "like",
        "love",
        "enjoy",
        "prefer",
        "hate",
        "dislik",
        "favourit",
        "favorit",
        "take",
        "taken",
        "use",
        "get",
        "got",
        "go",
        "went",
        "realli",
        "also",
        "alway",
        "usual",
        "often",
        "still",
        "now",
        "new",
        "old",
        "one",
        "thing",
        "lot",
        "much",
        "mani",
        "day",
        "week",
        "year",
        "time",
        "month",
        "morn",
        "even",
        "night",
        "weekend",
        "today",
        "recent",
        "last",
        "next",
        "first",
        "second",
        "back",
        "start",
        "stop",
    ]
)


# A new text that corrects an old one: "…, not Lanzarote", "actually on the 12th".
_CORRECTION = re.compile(r",\s*not\b|\bactually\b|\bcorrect(?:ion|ed)\b|\binstead\b", re.I)


def _values_only_in(values: set[str], others: set[str]) -> bool:
    """A value of ``values`` that ``others`` do not name, in any form ("Toronto"
    and "Toronto's", "4" and "4th" are one value)."""
    return bool(_unmatched(values, others))


# What sets a choice against another: "… than / over / rather than / instead of
# …", "not …", "stopped …". The words before it are the side chosen, those after
# the side set aside.
_SET_AGAINST = re.compile(
    r"\b(?:rather than|instead of|than|over|not|no longer|never|stopped|quit|gave up)\b|n't\b",
    re.I,
)
# "Prefers soba to udon" (but not "Prefers to walk"): "to" sets the choice against another.
_PREFERS = re.compile(r"\bprefer", re.I)
_PREFERS_TO = re.compile(r"prefer\w*\s+$", re.I)
_TO = re.compile(r"\bto\b", re.I)
# Words that name no side of a choice.
_CHOICE_FILLER = frozenset(
    [
        "the",
        "and",
        "his",
        "her",
        "its",
        "our",
        "their",
        "for",
        "with",
        "from",
        "has",
        "have",
        "had",
        "was",
        "were",
        "are",
        "been",
        "but",
        "this",
        "that",
        "these",
        "those",
        "very",
        "per",
        "all",
        "any",
        "one",
        "out",
        "off",
        "into",
        "onto",
        "about",
        "who",
        "what",
        "which",
        "when",
        "then",
        "just",
        "also",
        "still",
        "now",
        "some",
        "more",
        "most",
        "much",
        "prefers",
        "prefer",
        "preferred",
        "likes",
        "like",
        "would",
        "rather",
        "does",
        "doesn't",
    ]
)


# A candidate meets every probe of a create or a queue page: read each text once.
@lru_cache(maxsize=4096)
def _sides_of_choice(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(the words of the side chosen, the words of the side set aside); the
    second is empty when the text sets nothing aside."""
    match = _SET_AGAINST.search(text)
    if match is None and _PREFERS.search(text):
        after = [m for m in _TO.finditer(text) if not _PREFERS_TO.search(text[: m.start()])]
        match = after[-1] if after else None
    if match is None:
        return _choice_words(text), frozenset()
    return _choice_words(text[: match.start()]), _choice_words(text[match.end() :])


def _choice_words(text: str) -> frozenset[str]:
    return frozenset(
        word
        for word in (w.lower().replace("’", "'") for w in re.findall(r"[\w'’-]+", text))
        if len(word) > 2 and word not in _CHOICE_FILLER
    )


def reversed_choice(old_text: str, new_text: str) -> bool:
    """What one text chooses, the other sets aside ("Prefers soba to udon" /
    "Prefers udon to soba"; "Likes to winter in Arizona" / "Prefers the Gulf
    Coast to Arizona")."""
    old_chosen, old_aside = _sides_of_choice(old_text)
    new_chosen, new_aside = _sides_of_choice(new_text)

    return _meet(old_chosen, new_aside) or _meet(old_aside, new_chosen)


def _plain_values(values: set[str]) -> set[str]:
    parts = {part for value in values for part in value.split("-")}
    return {part for part in parts if len(part) > 1 or part.isdigit()}


def _merge_prefixes(words: set[str]) -> set[str]:
    """Lexemes with a shorter stem of the same word folded into it ("allerg",
    "allergi"): the English stemmer's forms of one word differ in the tail."""
    return {word for word in words if not any(o != word and word.startswith(o) for o in words)}


def _unmatched(words: Iterable[str], others: Iterable[str]) -> set[str]:
    """The words of ``words`` that are no word of ``others``: one word is
    another when they are equal or one is the other's stem of four letters or
    more ("allerg", "allergi"; "Toronto" and "Toronto's").

    A create compares its text with some thirty candidates: each word is
    looked up in a set, a tuple of stems and a sorted list, not compared with
    every other word.
    """
    others = frozenset(others)
    stems = tuple(other for other in others if len(other) >= 4)
    ordered = sorted(others)
    left: set[str] = set()
    for word in words:
        if word in others or word.startswith(stems):
            continue
        if len(word) >= 4:
            # The first of ``others`` at or after ``word`` starts with it if any does.
            index = bisect_left(ordered, word)
            if index < len(ordered) and ordered[index].startswith(word):
                continue
        left.add(word)
    return left


def _meet(first: Iterable[str], second: Iterable[str]) -> bool:
    """A word of ``first`` is a word of ``second`` (as ``_unmatched`` says)."""
    first = set(first)
    return len(_unmatched(first, second)) < len(first)


def _about_signals(
    old_text: str,
    new_text: str,
    old_lex: set[str],
    new_lex: set[str],
    old_values: set[str],
    new_values: set[str],
    old_about: About | None,
    new_about: About | None,
    old_type: str,
    new_type: str,
) -> dict:
    if old_about is None or new_about is None:
        return {}
    old_only = _unmatched(old_lex, new_lex)
    new_only = _unmatched(new_lex, old_lex)
    shared = (old_lex - old_only) - _FRAME_LEXEMES
    same_aspect = (
        None
        if not old_about.aspect or not new_about.aspect
        else topic_of(old_about.aspect) == topic_of(new_about.aspect)
    )
    both_events = old_type == new_type == "episodic"
    same_event = (
        same_occasion(old_about.occasion, new_about.occasion, new_text=new_text)
        if both_events
        else None
    )
    aspect_words = _aspect_lexemes(old_about.aspect)
    # The opening words of a fact are its frame ("Grows corn", "Can cook dal"):
    # sharing them says nothing of the object.
    leading = _leading_words(old_text) | _leading_words(new_text)
    object_words = {
        w
        for w in _unmatched(shared, aspect_words)
        if not any(word.startswith(w[:4]) for word in leading)
    }
    shared_values = old_values & new_values
    if old_values - new_values and new_values - old_values and not shared_values:
        # Each names something the other does not ("Netflix" / "Disney+"): two objects.
        object_words = set()
    dated = not old_about.occasion.startswith("~") and not new_about.occasion.startswith("~")
    redated = bool(same_event and dated and old_about.occasion != new_about.occasion)
    redated = redated and len(old_about.occasion) == len(new_about.occasion) == 10
    if same_event and dated and object_words:
        # One dated event told twice, whatever its words say it was about
        # ("saw Take That live" / "went to see Take That", both May 2024).
        same_aspect = True
    return {
        "old_about": old_about,
        "new_about": new_about,
        "both_events": both_events,
        "same_type": old_type == new_type,
        "same_subject": same_subject(old_about, new_about),
        "same_aspect": same_aspect,
        "same_occasion": same_event,
        "redated": redated,
        "multi_valued": is_multi_valued(new_about.aspect or old_about.aspect)
        and is_multi_valued(old_about.aspect or new_about.aspect),
        "shared_object": bool(object_words) or bool(shared_values),
        "shared_value": bool(shared_values),
        "frame_swap": any(
            any(w.startswith(o[:4]) for w in _leading_words(old_text)) for o in old_only
        )
        and any(any(w.startswith(o[:4]) for w in _leading_words(new_text)) for o in new_only),
        # Not a word in common: a paraphrase, or another fact altogether.
        "disjoint": not (old_lex - old_only),
        "substitution": bool(old_only)
        and bool(new_only)
        and len(old_only) <= 2
        and len(new_only) <= 2
        and len(old_lex - old_only) >= 2,
    }


@lru_cache(maxsize=4096)
def _leading_words(text: str) -> frozenset[str]:
    return frozenset(word.lower() for word in re.findall(r"[\w']+", text)[:2])


@lru_cache(maxsize=256)
def _aspect_lexemes(aspect: str) -> frozenset[str]:
    """Rough stems of an aspect's own name ("allergy" -> "allerg"): a shared
    "allergic" says nothing of the object."""
    words = aspect.replace("preference:", " ").replace("-", " ").split()
    return frozenset(word[: max(4, len(word) - 2)] for word in words)


@dataclass(frozen=True)
class Thresholds:
    duplicate_min_cosine: float = DUPLICATE_MIN_COSINE
    update_min_cosine: float = UPDATE_MIN_COSINE
    update_min_cosine_changed: float = UPDATE_MIN_COSINE_CHANGED
    duplicate_min_lexical: float = DUPLICATE_MIN_LEXICAL
    update_min_lexical: float = UPDATE_MIN_LEXICAL
    update_min_lexical_with_entity: float = UPDATE_MIN_LEXICAL_WITH_ENTITY


DEFAULT_THRESHOLDS = Thresholds()
# ``classify``'s default: the classifier stored in CLASSIFIER_PATH.
STORED = object()


def classify(
    signals: PairSignals,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    learned: LearnedClassifier | None | object = STORED,
) -> tuple[str | None, float]:
    """(relation or None for unrelated, score in [0, 1]) of one pair.

    The score is the cosine when there are embeddings, else the lexeme overlap.
    With what each side is about (``old_about``/``new_about``) and embeddings,
    the learned classifier weighs the about signals (``LearnedClassifier``;
    ``learned`` None uses the rules instead); without embeddings the rules
    judge by subject, aspect and occasion (``classify_by_about``).
    """
    if signals.same_text:
        return DUPLICATE, 1.0
    if signals.old_about is not None and signals.new_about is not None:
        model = stored_classifier() if learned is STORED else learned
        if model is not None and signals.cosine is not None:
            return model.classify(signals)
        return classify_by_about(signals)
    if signals.other_person:
        return None, 0.0
    differs = signals.value_conflict or signals.changed or signals.adds_detail
    if signals.cosine is not None:
        score = max(0.0, min(1.0, signals.cosine))
        if not differs and score >= thresholds.duplicate_min_cosine:
            return DUPLICATE, score
        floor = thresholds.update_min_cosine_changed if differs else thresholds.update_min_cosine
        return (UPDATE, score) if score >= floor else (None, score)
    score = signals.lexical
    # Words alone cannot tell a synonym from another value ("mum" for "mother",
    # "window" for "aisle"): a replaced word is never a duplicate here.
    if not differs and not signals.replaces_words and score >= thresholds.duplicate_min_lexical:
        return DUPLICATE, score
    if signals.shared_entities:
        floor = thresholds.update_min_lexical_with_entity
    elif signals.shared_lexemes < UPDATE_MIN_SHARED_LEXEMES:
        # One word in common (the owner's name, "owner") says nothing of the subject.
        return None, score
    else:
        floor = thresholds.update_min_lexical
    return (UPDATE, score) if score >= floor else (None, score)


def classify_by_about(signals: PairSignals) -> tuple[str | None, float]:
    """Duplicate, update, see also or unrelated, judged by what the two are about.

    - another subject, another aspect, another occasion, or another object of
      an aspect with several values (two allergies): not related; close ones
      are "see also";
    - otherwise one fact: a duplicate when nothing in it differs (however
      worded), an update when a value differs or the new text says it changed.
    An unknown aspect on either side is judged by closeness alone, strictly.
    """
    cosine = signals.cosine
    score = max(0.0, min(1.0, cosine)) if cosine is not None else signals.lexical
    # A paraphrase of an attribute with several values shares no word at all
    # ("Is teetotal" / "Never drinks alcohol"); another value shares the frame
    # ("Allergic to penicillin" / "Allergic to cats").
    same_object = (
        signals.shared_object
        or _very_close(signals)
        or (signals.disjoint and signals.same_aspect is True and not signals.value_conflict)
    )
    # Aspects are read from a few words; a pair this close naming the same
    # values is one fact whatever aspect each was given.
    aspect_differs = signals.same_aspect is False and not (
        cosine is not None and cosine >= SAME_FACT_MIN_COSINE and signals.shared_object
    )
    related_elsewhere = (
        not signals.same_subject
        or aspect_differs
        or signals.same_occasion is False
        or (signals.multi_valued and not same_object)
    )
    if related_elsewhere:
        return (SEE_ALSO, score) if _near(signals) else (None, score)
    # An unknown aspect: close enough, or a change that names what it changes
    # ("Has switched from Trados to memoQ" / "Uses SDL Trados").
    if signals.same_aspect is None and not (
        cosine is not None
        and cosine >= UNKNOWN_ASPECT_MIN_COSINE
        or signals.changed
        and signals.shared_value
    ):
        return (SEE_ALSO, score) if _near(signals) else (None, score)
    if signals.same_occasion is True:
        # One event told twice is a duplicate, more detail or not; a corrected
        # date or "…, not …" makes it an update.
        return (UPDATE if signals.redated or signals.changed else DUPLICATE), score
    if signals.changed or signals.value_conflict:
        return UPDATE, score
    if signals.disjoint:
        # Not a word in common and no value in conflict: the same fact reworded.
        return DUPLICATE, score
    if signals.substitution:
        # "Drinks coffee black" / "Takes his coffee black": another verb, one fact;
        # "Prefers an aisle seat" / "Prefers a window seat": another value.
        close = cosine is not None and cosine >= SUBSTITUTION_DUPLICATE_MIN_COSINE
        return (DUPLICATE if close or signals.frame_swap else UPDATE), score
    if cosine is not None:
        return (DUPLICATE if cosine >= ABOUT_DUPLICATE_MIN_COSINE else UPDATE), score
    if signals.lexical >= DUPLICATE_MIN_LEXICAL and not signals.replaces_words:
        return DUPLICATE, score
    return UPDATE, score


# --- the learned judgement ----------------------------------------------------------

# The rules above read each signal on its own; which of them matter, and how
# much, is learned from the labelled pairs (``manage.py related_eval --fit``
# writes this file; ``--cross-persona`` measures it on personas it was not
# fitted on). It holds for the embedding model it was fitted with (the file's
# "embeddings", ``embedding_space``): under another, the rules judge until it
# is fitted again with that model.
CLASSIFIER_PATH = Path(__file__).resolve().parent / "data" / "related-classifier.json"
CLASSIFIER_FORMAT = "timothy-related-classifier/1"
UNRELATED = "unrelated"
CLASSES = (UNRELATED, DUPLICATE, UPDATE)
# A pair is related when the classifier gives duplicate and update together
# at least this probability ...
RELATED_MIN_PROBABILITY = 0.5
# ... and a duplicate only when duplicate alone has this probability:
# extraction drops a duplicate, and an update only asks the owner to look.
DUPLICATE_MIN_PROBABILITY = 0.6


def _flag(value: bool | None) -> float:
    return 1.0 if value else 0.0


# Each feature reads the pair's signals and the rules' verdict on it.
PAIR_FEATURES: tuple[tuple[str, Callable[[PairSignals, str | None], float]], ...] = (
    ("cosine", lambda s, _: s.cosine or 0.0),
    ("cosine squared", lambda s, _: (s.cosine or 0.0) ** 2),
    ("lexeme overlap", lambda s, _: s.lexical),
    ("same subject", lambda s, _: _flag(s.same_subject)),
    ("same aspect", lambda s, _: _flag(s.same_aspect is True)),
    ("another aspect", lambda s, _: _flag(s.same_aspect is False)),
    ("same occasion", lambda s, _: _flag(s.same_occasion is True)),
    ("another occasion", lambda s, _: _flag(s.same_occasion is False)),
    ("several values", lambda s, _: _flag(s.multi_valued)),
    ("shared object", lambda s, _: _flag(s.shared_object)),
    ("shared value", lambda s, _: _flag(s.shared_value)),
    ("word swapped", lambda s, _: _flag(s.substitution)),
    ("no word shared", lambda s, _: _flag(s.disjoint)),
    ("verb swapped", lambda s, _: _flag(s.frame_swap)),
    ("redated", lambda s, _: _flag(s.redated)),
    ("values conflict", lambda s, _: _flag(s.value_conflict)),
    ("says changed", lambda s, _: _flag(s.changed)),
    ("adds detail", lambda s, _: _flag(s.adds_detail)),
    ("words replaced", lambda s, _: _flag(s.replaces_words)),
    ("another person named", lambda s, _: _flag(s.other_person)),
    ("shared entity", lambda s, _: _flag(s.shared_entities > 0)),
    ("both events", lambda s, _: _flag(s.both_events)),
    ("same type", lambda s, _: _flag(s.same_type)),
    ("cosine, same subject", lambda s, _: (s.cosine or 0.0) * _flag(s.same_subject)),
    ("cosine, another aspect", lambda s, _: (s.cosine or 0.0) * _flag(s.same_aspect is False)),
    (
        "cosine, another of several",
        lambda s, _: (s.cosine or 0.0) * _flag(s.multi_valued and not s.shared_object),
    ),
    ("cosine, values conflict", lambda s, _: (s.cosine or 0.0) * _flag(s.value_conflict)),
    # What the hand-written rules make of the pair: the classifier learns when to
    # trust them.
    ("rules: duplicate", lambda _, rules: _flag(rules == DUPLICATE)),
    ("rules: update", lambda _, rules: _flag(rules == UPDATE)),
    ("rules: see also", lambda _, rules: _flag(rules == SEE_ALSO)),
    ("cosine, says changed", lambda s, _: (s.cosine or 0.0) * _flag(s.changed)),
    ("a value only in the new", lambda s, _: _flag(s.new_value)),
    ("a value only in the old", lambda s, _: _flag(s.old_value)),
    ("a choice reversed", lambda s, _: _flag(s.reversed_choice)),
    ("a place replaced", lambda s, _: _flag(s.place_replaced)),
)


def pair_features(signals: PairSignals) -> list[float]:
    rules, _ = classify_by_about(signals)
    return [float(feature(signals, rules)) for _, feature in PAIR_FEATURES]


@dataclass(frozen=True)
class LearnedClassifier:
    """A multinomial logistic regression over ``PAIR_FEATURES``, standardised."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    # One row per feature and a last one for the bias; one column per class.
    weights: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        import numpy as np

        # The standardisation folded into the weights: logits = features @ slope + bias.
        weights = np.asarray(self.weights, dtype=float)
        scale = np.asarray(self.scale, dtype=float)
        slope = weights[:-1] / scale[:, None]
        bias = weights[-1] - np.asarray(self.mean, dtype=float) @ slope
        object.__setattr__(self, "_slope", slope)
        object.__setattr__(self, "_bias", bias)

    def probabilities(self, signals: PairSignals) -> dict[str, float]:
        import numpy as np

        logits = np.asarray(pair_features(signals)) @ self._slope + self._bias
        exps = np.exp(logits - logits.max())
        return dict(zip(CLASSES, (exps / exps.sum()).tolist(), strict=True))

    def classify(self, signals: PairSignals) -> tuple[str | None, float]:
        score = max(0.0, min(1.0, signals.cosine or 0.0))
        p = self.probabilities(signals)
        related = p[DUPLICATE] + p[UPDATE]
        if related < RELATED_MIN_PROBABILITY:
            return (SEE_ALSO, score) if _near(signals) else (None, score)
        return (DUPLICATE if p[DUPLICATE] >= DUPLICATE_MIN_PROBABILITY else UPDATE), score

    def to_document(self, **about_the_fit) -> dict:
        return {
            "format": CLASSIFIER_FORMAT,
            **about_the_fit,
            "classes": list(CLASSES),
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": [list(row) for row in self.weights],
        }

    @classmethod
    def from_document(cls, document: dict) -> LearnedClassifier:
        names = tuple(name for name, _ in PAIR_FEATURES)
        if document.get("format") != CLASSIFIER_FORMAT or tuple(document["features"]) != names:
            raise ValueError("the classifier file does not match PAIR_FEATURES: fit it again")
        return cls(
            features=names,
            mean=tuple(document["mean"]),
            scale=tuple(document["scale"]),
            weights=tuple(tuple(row) for row in document["weights"]),
        )


def stored_classifier() -> LearnedClassifier | None:
    """The classifier fitted on the labelled pairs, or None (the rules judge)
    when its file is missing, does not match the features, or was fitted on
    another embedding model's cosines than the configured one's."""
    fitted = classifier_file()
    if fitted is None:
        return None
    space, model = fitted
    return model if space == embedding_space() else None


@lru_cache(maxsize=1)
def classifier_file() -> tuple[str, LearnedClassifier] | None:
    """(the embedding space it was fitted in, the classifier) from CLASSIFIER_PATH,
    read once (``classifier_file.cache_clear()`` reads it again)."""
    try:
        document = json.loads(CLASSIFIER_PATH.read_text(encoding="utf-8"))
        return str(document["embeddings"]), LearnedClassifier.from_document(document)
    except (OSError, ValueError, KeyError, TypeError) as error:
        logger.warning("Judging related memories by the rules: %s", error)
        return None


def _near(signals: PairSignals) -> bool:
    if signals.cosine is not None:
        return signals.cosine >= SEE_ALSO_MIN_COSINE
    # Without embeddings: most words in common (a shared name alone is not near).
    return signals.lexical >= SEE_ALSO_MIN_LEXICAL


def _very_close(signals: PairSignals) -> bool:
    return signals.cosine is not None and signals.cosine >= SAME_OBJECT_MIN_COSINE


# --- finding the related memories ----------------------------------------------------


@dataclass(frozen=True)
class RelatedMemory:
    memory: Memory
    relation: str
    score: float
    signals: PairSignals
    # The memory's status when it was judged (a remember may supersede it next).
    status: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", self.memory.status)

    def to_dict(self) -> dict:
        return {
            "id": self.memory.pk,
            "relation": self.relation,
            "score": round(self.score, 3),
            # What the assistant can tell the user without another request.
            "content": self.memory.content,
            # "active", or "proposed": the same fact already waits in the queue.
            "status": self.status,
        }


@dataclass
class RelatedResult:
    related: list[RelatedMemory] = field(default_factory=list)
    # Why the answer is less than it could be ("" when nothing was missing).
    degraded: str = ""
    # The text's embedding, when one was computed here (the caller may store it).
    embedding: list[float] | None = None
    # What the text is about, as judged here (the caller may store it).
    about: About | None = None

    @property
    def duplicates(self) -> list[RelatedMemory]:
        return [item for item in self.related if item.relation == DUPLICATE]

    @property
    def updates(self) -> list[RelatedMemory]:
        return [item for item in self.related if item.relation == UPDATE]

    def to_list(self) -> list[dict]:
        return [item.to_dict() for item in self.related]


@dataclass(frozen=True)
class Probe:
    """One text to find related memories for."""

    key: int
    content: str
    entities: tuple[str, ...] = ()
    embedding: tuple[float, ...] | None = None
    # Memory ids never to report (the probe itself, say).
    exclude: tuple[int, ...] = ()
    type: str = ""
    # What the text is about; derived from it when not given.
    about: About | None = None

    def resolved_about(self, owner_names: tuple[str, ...] = (), known=None) -> About:
        """The about given, or the one read from the text (and, with an
        embedding, the aspect no rule names read from its meaning); ``known``
        as ``derive_about`` takes it."""
        if self.about is not None:
            return self.about
        about = derive_about(
            self.content,
            self.type or "semantic",
            entities=self.entities,
            owner_names=owner_names,
            known=known,
        )
        if self.embedding is not None:
            about = refined(about, self.type or "semantic", self.embedding, get_provider())
        return about


def find_related(
    owner,
    content: str,
    *,
    entities: Iterable[str] = (),
    embedding: Sequence[float] | None = None,
    exclude: Iterable[int] = (),
    include_proposals: bool = False,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    type: str = "",
    about: About | None = None,
) -> RelatedResult:
    """The owner's memories that ``content`` repeats or updates, best first.

    Active memories only, unless ``include_proposals`` (extraction must not
    propose what already waits in the queue). Embeds ``content`` when no
    ``embedding`` is given and a provider is configured.
    """
    degraded = ""
    computed: list[float] | None = None
    if embedding is None:
        provider = get_provider()
        if provider is None:
            degraded = NO_PROVIDER
        elif model_loading():
            degraded = MODEL_STILL_LOADING  # a fresh worker does not wait (timothy/warmup.py)
        else:
            try:
                [computed] = provider.embed([content], timeout=EMBED_TIMEOUT_SECONDS)
            except EmbeddingError as error:
                logger.warning("Related memories without embeddings: %s", error)
                degraded = EMBEDDING_FAILED
            embedding = computed
    probe = Probe(
        key=0,
        content=content,
        entities=tuple(entities),
        embedding=tuple(embedding) if embedding is not None else None,
        exclude=tuple(exclude),
        type=type,
        about=about,
    )
    # One reading of the owner for the check and the about it answers with:
    # whom the store names is read once (functools.cache), not once for each.
    reading = owner_reading(owner)
    results = related_for_probes(owner, [probe], include_proposals, thresholds, reading=reading)
    result = results[0]
    result.degraded = result.degraded or degraded
    result.embedding = computed
    result.about = probe.resolved_about(**reading)
    return result


def related_for_memories(
    owner,
    memories: Sequence[Memory],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    include_proposals: bool = False,
) -> dict[int, RelatedResult]:
    """Related active memories of each of ``memories`` (the queue page), in one query;
    with ``include_proposals``, the owner's other proposals too (two copies of
    one fact waiting in the queue).

    Uses each memory's stored embedding; one without a vector yet is compared
    by entities and words, and its result says so.
    """
    probes = [
        Probe(
            key=memory.pk,
            content=memory.content,
            entities=tuple(memory.entity_refs),
            embedding=tuple(memory.embedding) if memory.embedding is not None else None,
            exclude=(memory.pk,),
            type=memory.type,
            about=memory.about,
        )
        for memory in memories
    ]
    results = related_for_probes(owner, probes, include_proposals, thresholds)
    has_provider = get_provider() is not None
    for probe in probes:
        if probe.embedding is None and not results[probe.key].degraded:
            results[probe.key].degraded = (
                "no embedding yet: compared by entities and words only"
                if has_provider
                else NO_PROVIDER
            )
    return results


def related_for_probes(
    owner,
    probes: Sequence[Probe],
    include_proposals: bool = False,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    reading: dict | None = None,
) -> dict[int, RelatedResult]:
    """Each probe's related memories; ``reading`` (``owner_reading``) may be
    one the caller reads the owner with too."""
    if not probes:
        return {}
    report, rows = run_step(
        "related",
        lambda cursor: _candidates(cursor, owner.pk, probes, include_proposals),
        QUERY_TIMEOUT_SECONDS,
    )
    if report.status != "ok":
        logger.warning("Related memories unavailable: %s", report.error)
        return {probe.key: RelatedResult(degraded=QUERY_FAILED) for probe in probes}
    by_key = {probe.key: probe for probe in probes}
    reading = reading if reading is not None else owner_reading(owner)
    probe_abouts = {probe.key: probe.resolved_about(**reading) for probe in probes}
    found: dict[int, list[tuple[int, PairSignals, str, float]]] = {p.key: [] for p in probes}
    memory_ids: set[int] = set()
    for row in rows or []:
        key, memory_id, content, entity_refs, lexemes, probe_lexemes, cosine = row[:7]
        memory_type, subject, kind, aspect, occasion, set_by, created_at = row[7:]
        probe = by_key[key]
        old_about = (
            About(subject, kind, aspect, occasion, set_by)
            if kind
            else derive_about(
                content, memory_type, entities=entity_refs, written=created_at, **reading
            )
        )
        signals = PairSignals.of(
            old_text=content,
            new_text=probe.content,
            old_lexemes=lexemes,
            new_lexemes=probe_lexemes,
            old_entities=entity_refs,
            new_entities=probe.entities,
            cosine=cosine,
            old_about=old_about,
            new_about=probe_abouts[key],
            old_type=memory_type,
            new_type=probe.type or memory_type,
        )
        relation, score = classify(signals, thresholds)
        if relation is not None:
            found[key].append((memory_id, signals, relation, score))
            memory_ids.add(memory_id)
    # The vectors are not needed here, and each costs ~1.5 KB to read and parse.
    memories = Memory.objects.defer("embedding").in_bulk(memory_ids)
    results: dict[int, RelatedResult] = {}
    order = {DUPLICATE: 0, UPDATE: 1, SEE_ALSO: 2}
    for key, items in found.items():
        # Duplicates first, then updates, then "see also"; each by score.
        items.sort(key=lambda item: (order[item[2]], -item[3], item[0]))
        judged = [item for item in items if item[2] != SEE_ALSO][:MAX_RELATED]
        see_also = [item for item in items if item[2] == SEE_ALSO][:MAX_SEE_ALSO]
        results[key] = RelatedResult(
            related=[
                RelatedMemory(memories[memory_id], relation, score, signals)
                for memory_id, signals, relation, score in judged + see_also
                if memory_id in memories
            ]
        )
    return results


def _candidates(cursor, owner_id: int, probes: Sequence[Probe], include_proposals: bool):
    """Rows (probe key, memory id, content, entities, lexemes, probe lexemes, cosine).

    The nearest stored vectors of each probe with an embedding first, one
    statement each through the half-precision covering index the vector leg
    reads (``retrieval.legs.nearest_active``: the float32 scan's answer at half
    the bytes); then one statement for every probe: those, the memories
    sharing an entity, and those sharing the most lexemes (from the postings,
    which hold active memories only); with ``include_proposals``, the owner's
    proposals that are near or share a lexeme as well.
    """
    nearest = {
        probe.key: nearest_active(cursor, owner_id, probe.embedding, CANDIDATES_PER_SOURCE)
        for probe in probes
        if probe.embedding
    }
    payload = [
        {
            "key": probe.key,
            "content": clean_query(probe.content),
            "entities": [entity.strip().lower() for entity in probe.entities if entity.strip()],
            "embedding": vector_text(probe.embedding) if probe.embedding else None,
            "exclude": list(probe.exclude),
            "nearest": nearest.get(probe.key, []),
        }
        for probe in probes
    ]
    statuses = ["active", "proposed"] if include_proposals else ["active"]
    proposals_source = (
        f"""
            UNION
            (SELECT m.id FROM {MEMORY_TABLE} m
             WHERE m.owner_id = %(owner_id)s AND m.status = 'proposed'
               AND (coalesce(tsvector_to_array(m.tsv), '{{}}') && p.lexemes
                    OR 1 - (m.embedding <=> p.embedding) >= %(proposal_min_cosine)s)
             ORDER BY m.embedding <=> p.embedding NULLS LAST, m.id DESC
             LIMIT %(per_source)s)
        """
        if include_proposals
        else ""
    )
    cursor.execute(
        f"""
        WITH probes AS MATERIALIZED (
            SELECT (j->>'key')::bigint AS key,
                   j->>'content' AS content,
                   ARRAY(SELECT jsonb_array_elements_text(j->'entities')) AS entities,
                   (j->>'embedding')::vector AS embedding,
                   ARRAY(SELECT jsonb_array_elements_text(j->'exclude'))::bigint[] AS exclude,
                   ARRAY(SELECT jsonb_array_elements_text(j->'nearest'))::bigint[] AS nearest,
                   coalesce(tsvector_to_array(to_tsvector('english', j->>'content')), '{{}}')
                       AS lexemes
            FROM jsonb_array_elements(%(probes)s::jsonb) AS j
        ),
        candidates AS (
            SELECT DISTINCT p.key, c.id FROM probes p CROSS JOIN LATERAL (
                (SELECT unnest(p.nearest))
                UNION
                (SELECT t.memory_id FROM {POSTING_TABLE} t
                 WHERE t.owner_id = %(owner_id)s AND t.kind = 'e' AND t.term = ANY(p.entities)
                 GROUP BY t.memory_id ORDER BY count(*) DESC, t.memory_id DESC
                 LIMIT %(per_source)s)
                UNION
                (SELECT t.memory_id FROM {POSTING_TABLE} t
                 WHERE t.owner_id = %(owner_id)s AND t.kind = 'l' AND t.term = ANY(p.lexemes)
                 GROUP BY t.memory_id ORDER BY count(*) DESC, min(t.length), t.memory_id DESC
                 LIMIT %(per_source)s)
                {proposals_source}
            ) AS c(id)
            WHERE c.id <> ALL(p.exclude)
        )
        SELECT p.key, m.id, m.content, m.entity_refs,
               coalesce(tsvector_to_array(m.tsv), '{{}}'), p.lexemes,
               CASE WHEN p.embedding IS NOT NULL AND m.embedding IS NOT NULL
                    THEN 1 - (m.embedding <=> p.embedding) END,
               m.type, m.about_subject, m.about_kind, m.about_aspect, m.about_occasion,
               m.about_set_by, m.created_at
        FROM candidates c
        JOIN probes p ON p.key = c.key
        JOIN {MEMORY_TABLE} m ON m.id = c.id
        WHERE m.owner_id = %(owner_id)s AND m.status = ANY(%(statuses)s)
        """,
        {
            "probes": json.dumps(payload),
            "owner_id": owner_id,
            "per_source": CANDIDATES_PER_SOURCE,
            "statuses": statuses,
            "proposal_min_cosine": UPDATE_MIN_COSINE_CHANGED,
        },
    )
    return cursor.fetchall()
