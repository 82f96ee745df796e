"""Names in a text, read from the text alone: proper-noun spans (runs of
capitalised words, "Celia Hammond Animal Trust", "Bank of England") and the
known names a text names. Plain text in, strings out; what an owner's
dictionary knows is retrieval's (retrieval/entities.py), and what a memory
is about uses the spans too (memories/about.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Longest run of words looked up as one known name.
MAX_NAME_WORDS = 5
# Lower-case words that may join capitalised words inside one name ("Bank of
# England", "Vincent van Gogh"); "and" and "in" would glue neighbours together.
CONNECTORS = frozenset(
    {"of", "the", "de", "da", "do", "dos", "das", "del", "della", "di", "du", "van", "von",
     "der", "den", "la", "le", "y"}
)  # fmt: skip
# Capitalised words that are not names on their own.
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NOT_NAMES = frozenset(
    {"i", "i'm", "i've", "i'll", "i'd", "january", "february", "march", "april", "may", "june",
     "july", "august", "september", "october", "november", "december", *_WEEKDAYS,
     *(day + "s" for day in _WEEKDAYS), "mr", "mrs", "ms", "dr", "mum", "dad", "ok", "okay"}
)  # fmt: skip

_WORD = re.compile(r"[^\W_][\w'’.-]*[^\W_]|[^\W_]", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?:;\n\"“”(]\s*$")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(match.group(), match.start(), match.end()) for match in _WORD.finditer(text)]


# Words that open a sentence without being part of a name after them
# ("Before Fernwood", "She and Owen", "At the Fernwood offsite").
OPENERS = frozenset(
    {"a", "an", "the", "this", "that", "these", "those", "my", "your", "his", "her", "its",
     "our", "their", "he", "she", "it", "we", "they", "you", "me", "him", "us", "them", "at",
     "in", "on", "by", "for", "from", "to", "of", "with", "without", "about", "after",
     "before", "since", "until", "during", "while", "when", "where", "if", "as", "and", "but",
     "or", "so", "because", "then", "also", "still", "is", "was", "are", "were", "has",
     "had", "have", "does", "did", "do", "will", "would", "can", "could", "should", "may",
     "might", "must", "not", "no", "yes", "every", "each", "both", "all", "some", "most",
     "many", "only", "just", "even", "once", "twice", "never", "always", "usually", "often",
     "there", "here", "what", "which", "who", "why", "how", "dear", "hi", "hello", "thanks"}
)  # fmt: skip


# Verbs that follow a name opening a sentence ("Claire gave", "Toby was").
VERBS_AFTER_A_NAME = frozenset(
    {"is", "was", "has", "had", "and", "said", "will", "would", "can", "could", "may", "might",
     "must", "should", "does", "did", "gave", "went", "came", "took", "made", "got", "told",
     "rang", "sent", "left", "met", "bought", "brought", "thought", "found", "felt", "ran",
     "won", "lost", "paid", "wrote", "fell", "began", "became", "kept", "held", "heard", "saw",
     "knew", "grew", "drove", "flew", "sold", "spent", "taught", "caught", "built", "moved"}
)  # fmt: skip


def _letters(word: str) -> str:
    return "".join(char for char in _clean(word) if char.isalpha())


def _is_capitalised(word: str) -> bool:
    """A name-like word: capitalised ("Lisbon") or with a capital inside ("iPhone", "1Password")."""
    letters = _letters(word)
    if not letters or not any(char.isupper() for char in letters):
        return False
    return letters[0].isupper() or any(char.isupper() for char in letters[1:])


def _is_weak(word: str) -> bool:
    """A one- or two-letter capital ("UX", "FT", "V4"): part of a name at most, never one alone."""
    return len(_letters(word)) <= 2


def _is_number(word: str) -> bool:
    return word.isdigit()


def _opens_sentence(text: str, start: int) -> bool:
    return start == 0 or bool(_SENTENCE_END.search(text[:start]))


def _clean(name: str) -> str:
    return _POSSESSIVE.sub("", name.strip(" .,'’-"))


def _looks_like_a_verb(word: str, *, after: str) -> bool:
    """Whether a word right after a capitalised opener makes the opener its
    subject, as in "Ana lives", "Helen retired", "Toby was", "Claire gave".

    After an opener that is itself a verb form ("Likes dogs", "Keeps bees")
    only the plain verbs listed count.
    """
    folded = word.casefold()
    if folded in VERBS_AFTER_A_NAME:
        return True
    opener = _clean(after).casefold()
    if len(folded) <= 3 or not folded.isalpha() or opener.endswith("s"):
        return False
    return (folded.endswith("s") and not folded.endswith("ss")) or folded.endswith("ed")


def _is_plain_opener(word: str) -> bool:
    """A capitalised sentence opener that is an ordinary word, not a name:
    a function word, or a verb ("Met Cleo", "Visited Arjun", "Getting quotes")."""
    folded = _clean(word).casefold()
    return folded in OPENERS or folded in VERBS_AFTER_A_NAME or folded.endswith(("ed", "ing"))


def proper_noun_spans(text: str) -> list[str]:
    """Runs of capitalised words, by the rules in the module docstring."""
    words = _words(text)
    capitalised_inside = {
        _clean(word).casefold()
        for word, start, _ in words
        if _is_capitalised(word) and not _opens_sentence(text, start)
    }

    def name_word(word: str) -> bool:
        return _is_capitalised(word) and _clean(word).casefold() not in NOT_NAMES

    spans: list[str] = []
    index = 0
    while index < len(words):
        word, start, _ = words[index]
        if not name_word(word):
            index += 1
            continue
        last = index
        probe = index + 1
        while probe < len(words):
            following, following_start, _ = words[probe]
            if text[words[probe - 1][2] : following_start].strip(" "):
                break  # punctuation between the words ends the name
            if name_word(following) or (_is_number(following) and probe == last + 1):
                last = probe
                probe += 1
            elif following.casefold() in CONNECTORS and probe + 1 < len(words):
                probe += 1
            else:
                break
        first = index
        if _opens_sentence(text, start) and _clean(word).casefold() not in capitalised_inside:
            possessive = word != _clean(word)
            subject = (
                last == index
                and index + 1 < len(words)
                and _looks_like_a_verb(words[index + 1][0], after=word)
            )
            # A capitalised word opening a sentence is usually just that ("Rent",
            # "Likes tea", "Before Fernwood", "Visited Arjun"), unless it is
            # possessive ("Owen's birthday"), the subject of a verb ("Ana lives")
            # or starts a longer name ("Jonah Weiss").
            lone = last == index and not possessive and not subject
            if lone or _is_plain_opener(word):
                first += 1
                while first <= last and not name_word(words[first][0]):
                    first += 1
        run = words[first : last + 1]
        if run and not all(_is_weak(w) or _is_number(w) for w, _, _ in run):
            name = _clean(text[run[0][1] : run[-1][2]])
            if name:
                spans.append(name)
        index = last + 1
    return spans


def word_runs(text: str, max_words: int = MAX_NAME_WORDS) -> set[str]:
    """Every stretch of the text spanning up to ``max_words`` consecutive words,
    punctuation inside kept ("dr. okafor"), lower-cased and single-spaced like
    the entity dictionary's keys."""
    words = _words(text)
    runs: set[str] = set()
    for first in range(len(words)):
        for last in range(first, min(first + max_words, len(words))):
            run = " ".join(text[words[first][1] : words[last][2]].lower().split())
            runs.add(run)
            runs.add(_POSSESSIVE.sub("", run))  # "morag's" names "morag"
    return runs


def known_names_in(text: str, known_keys: Iterable[str]) -> list[str]:
    """Known entities (lower-cased keys) the text names, spelled as the text spells them."""
    keys = set(known_keys) & word_runs(text)
    found: list[str] = []
    for key in sorted(keys, key=len, reverse=True):
        pattern = r"(?<!\w)" + r"\s+".join(map(re.escape, key.split())) + r"(?!\w)"
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            found.append(match.group())
    return found
