"""What a text search of the memory list means, for the pages and the API alike.

A memory matches a search when every word (or "quoted phrase") of it appears in
the content, ignoring case and accents ("pasteis" finds "pastéis", "AERO" finds
"Ærø"), and none of the ``-excluded`` ones does; or when English full-text search
matches it (stemmed: "seat" finds "seats"; ``websearch_to_tsquery`` syntax).

Ignoring accents is *folding*: lower case, Unicode compatibility decomposition
(NFKD), combining marks dropped, and the few Latin letters that do not decompose
spelled out (ø → o, ß → ss, æ → ae). ``fold`` does it in Python, to highlight
what matched. PostgreSQL's ``unaccent`` would do it in the database, but it is a
contrib extension that the embedded server does not ship, and folding every
memory with ``normalize()`` costs about 30 µs a memory (300 ms for 10,000). So
the database is given the search term as a regular expression that accepts
every spelling that folds to it: "e" becomes ``[eEèéêëÈÉÊË…]`` followed by
any combining marks (``term_pattern``). That needs nothing beyond a plain
PostgreSQL and costs about what ``ILIKE`` does.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field

# Combining marks that folding drops: Latin, Greek and Cyrillic accents, their
# extensions, and Hebrew points and Arabic vowel signs (often left out in writing).
COMBINING_MARKS = (
    "\u0300-\u036f"
    "\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"
    "\u0610-\u061a\u064b-\u065f\u0670"
    "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
)
# Letters without a decomposition, spelled the way people type them without accents.
SPELLED_OUT = {
    "ø": "o",
    "ł": "l",
    "đ": "d",
    "ð": "d",
    "ħ": "h",
    "ı": "i",
    "ŧ": "t",
    "þ": "th",
    "ß": "ss",
    "æ": "ae",
    "œ": "oe",
}

_MARKS = re.compile(f"[{COMBINING_MARKS}]")


def fold_char(char: str) -> str:
    """One character folded: '' for a combining mark, 'ss' for 'ß', 'e' for 'É'."""
    text = _MARKS.sub("", unicodedata.normalize("NFKD", char.lower())).lower()
    return "".join(SPELLED_OUT.get(piece, piece) for piece in text)


def fold(text: str) -> str:
    return "".join(fold_char(char) for char in text)


# --- the search's words ------------------------------------------------------------


@dataclass
class SearchTerms:
    # Folded words and quoted phrases that must all appear; ones that must not.
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)


# A "quoted phrase" (closed or not) or a run of non-space characters.
_TERM = re.compile(r'(-?)"([^"]*)"?|(\S+)')
# Characters around a word that punctuate the search, not the text.
_EDGE_PUNCTUATION = "\"'“”‘’«»()[]{},;:!?."


def search_terms(text: str) -> SearchTerms:
    """The words and phrases of a search, folded. ``or`` is left to the full-text half."""
    terms = SearchTerms()
    for match in _TERM.finditer(text):
        negated, phrase, word = match.groups()
        if word is not None:
            negated = "-" if word.startswith("-") and len(word) > 1 else ""
            term = word[len(negated) :].strip(_EDGE_PUNCTUATION)
            if not negated and term.lower() == "or":
                continue
        else:
            term = " ".join(phrase.split())
        term = fold(term)
        if term:
            (terms.exclude if negated else terms.include).append(term)
    return terms


# --- in the database: a pattern per term ------------------------------------------------


@functools.cache
def _spellings() -> tuple[dict[str, str], dict[str, str]]:
    """Every character that folds to something else, by what it folds to.

    (one character → its other spellings, several characters → single characters
    spelling them, e.g. "ss" → "ß", "fi" → "ﬁ"). Built once per process (about
    0.1 s) from the characters Unicode decomposes, lowers or we spell out.
    """
    single: dict[str, set[str]] = {}
    several: dict[str, set[str]] = {}
    spelled = set(SPELLED_OUT) | {char.upper() for char in SPELLED_OUT}
    for codepoint in range(0x80, 0x10000):
        char = chr(codepoint)
        if not (unicodedata.decomposition(char) or char in spelled or char.lower() != char):
            continue
        folded = fold(char)
        if folded and folded != char and folded.isalnum():
            (single if len(folded) == 1 else several).setdefault(folded, set()).add(char)
    join = "".join
    return (
        {key: join(sorted(chars)) for key, chars in single.items()},
        {key: join(sorted(chars)) for key, chars in several.items()},
    )


def _literal(char: str) -> str:
    """``char`` inside a PostgreSQL regular expression, bracketed or not."""
    if char.isalnum():
        return char
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def _any_spelling(char: str, single: dict[str, str]) -> str:
    chars = dict.fromkeys(char + char.upper() + single.get(char, ""))
    if len(chars) == 1:
        return _literal(char)
    return "[" + "".join(_literal(other) for other in chars) + "]"


def term_pattern(term: str) -> str:
    """A PostgreSQL regular expression matching every text whose fold contains ``term``.

    ``term`` is folded (``search_terms``). Each of its characters may be spelled
    any way that folds to it and be followed by combining marks; a run of them
    may also be one character that folds to the run ("ss" or "ß").
    """
    single, several = _spellings()
    marks = f"[{COMBINING_MARKS}]*"
    parts: list[str] = []
    index = 0
    while index < len(term):
        runs = [run for run in several if term.startswith(run, index)]
        if runs:
            run = max(runs, key=len)
            spelled_out = "".join(_any_spelling(char, single) + marks for char in run)
            together = "[" + "".join(_literal(char) for char in several[run]) + "]" + marks
            parts.append(f"(?:{spelled_out}|{together})")
            index += len(run)
        else:
            parts.append(_any_spelling(term[index], single) + marks)
            index += 1
    return "".join(parts)


# --- on the page: what to highlight ----------------------------------------------------


def highlight_spans(text: str, search: str) -> list[tuple[int, int]]:
    """Where the searched words and phrases appear in ``text``, ignoring case and accents.

    Half-open (start, end) character ranges of ``text``, sorted and merged.
    """
    terms = search_terms(search).include
    if not terms or not text:
        return []
    folded_parts = [fold_char(char) for char in text]
    folded = "".join(folded_parts)
    # For each folded character, the index of the original character it came from.
    origin = [index for index, part in enumerate(folded_parts) for _ in part]
    spans: list[tuple[int, int]] = []
    for term in terms:
        start = folded.find(term)
        while start != -1:
            end = start + len(term)
            last = origin[end - 1] + 1
            # Marks folded away after the last letter belong to it.
            while last < len(text) and not folded_parts[last]:
                last += 1
            spans.append((origin[start], last))
            start = folded.find(term, end)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
