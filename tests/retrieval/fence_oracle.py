"""An independent reading of rendered blocks, for the fence tests.

It shares no code or tables with retrieval/render.py. Two readings:

- The structure: the whole block is normalised with NFKC, Unicode tag
  characters are decoded to the ASCII they mirror, everything invisible is
  removed, and look-alikes are folded with the confusable_homoglyphs package's
  copy of Unicode's confusables data. Then the fence tags, chat-template tokens
  and line structure are checked on what is left.
- Each item: no character that is, decomposes to, is named as or is confusable
  with "<", ">" or "&" (derived here from the Unicode data, character by
  character), no "&" that does not start an entity for one of those, no
  bracketed control word, and no character that draws nothing outside the few
  places text needs one (the default-ignorable set comes from the ``regex``
  package's Unicode tables, not from Python's).
"""

from __future__ import annotations

import functools
import html
import re
import sys
import unicodedata

import regex
from confusable_homoglyphs.confusables import confusables_data

PREAMBLE_LINES = 2
MEMORY_TYPES = ("semantic", "preference", "episodic", "reflection")
OPEN_TAG_LINE = '<memory source="timothy-memory" trust="data">'

_FOLD_TARGETS = "</|memoryMEMORY"


def _fold_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for key, glyphs in confusables_data.items():
        group = {key.replace("\u200e", "")} | {g["c"].replace("\u200e", "") for g in glyphs}
        for target in _FOLD_TARGETS:
            if target not in group:
                continue
            for char in group:
                # "l", "I" and "1" look like "|", but "x<1" is ordinary text.
                if len(char) == 1 and char != target and not (target == "|" and char.isascii()):
                    table[char] = target.lower()
    return table


_FOLD = _fold_table()
_INVISIBLE = {"Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me"}
# Default-ignorable letters: the Hangul fillers draw nothing.
_INVISIBLE_LETTERS = {"\u115f", "\u1160", "\u3164", "\uffa0"}


def normalise(text: str) -> str:
    """What the text reads as: NFKC, tag characters decoded, invisibles gone, look-alikes
    folded, lower case. Line breaks and tabs are kept so lines can still be checked."""
    decoded = "".join(
        chr(ord(char) - 0xE0000) if 0xE0020 <= ord(char) <= 0xE007E else char for char in text
    )
    kept = []
    for char in unicodedata.normalize("NFKC", decoded):
        if char in _INVISIBLE_LETTERS:
            continue
        if char in "\n\t" or unicodedata.category(char) not in _INVISIBLE:
            kept.append(_FOLD.get(char, char).lower())
    return "".join(kept)


_LETTERS = r"(?:m|rn)\s*e\s*(?:m|rn)\s*o\s*r\s*y"
ANY_FENCE_TAG = re.compile(rf"<[\s/]*{_LETTERS}")
CLOSING_FENCE_TAG = re.compile(rf"<\s*/[\s/]*{_LETTERS}")
OPENING_FENCE_TAG = re.compile(rf"<\s*{_LETTERS}")
CHAT_TOKEN = re.compile(r"<\s*\|")
ROLE_LINE = re.compile(
    r"^\s*(?:system|user|assistant|human|developer)\s*:|^\s*</?\s*(?:system|user|assistant)"
    r"|^\s*<\s*\||^\s*\[/?inst\]|^\s*<<\s*/?sys>>",
    re.MULTILINE,
)


def forbidden_constructs(content: str) -> list[str]:
    """What in raw memory content would break or forge the fence if copied verbatim."""
    found = []
    text = normalise(content)
    if ANY_FENCE_TAG.search(text):
        found.append("fence tag")
    if CHAT_TOKEN.search(text):
        found.append("chat-template token")
    if content.splitlines() != [content]:
        found.append("line break")
    return found


def assert_well_formed(block: str, item_count: int) -> None:
    """The block is one fence around ``item_count`` memory lines, and nothing else."""
    assert block.splitlines() == block.split("\n"), "a line break other than \\n"
    lines = block.split("\n")
    assert lines[0] == OPEN_TAG_LINE
    assert lines[-1] == "</memory>"
    items = lines[PREAMBLE_LINES:-1]
    assert len(items) == item_count
    item_start = re.compile(r"- \[(?:" + "|".join(MEMORY_TYPES) + r")\] ")
    for line in items:
        assert item_start.match(line), f"not a memory line: {line[:80]!r}"

    text = normalise(block)
    closing = [m.start() for m in CLOSING_FENCE_TAG.finditer(text)]
    opening = [m.start() for m in OPENING_FENCE_TAG.finditer(text)]
    assert opening == [0], f"opening fence tags at {opening}"
    assert closing == [text.rindex("\n") + 1], f"closing fence tags at {closing}"
    assert len(ANY_FENCE_TAG.findall(text)) == 2
    assert not CHAT_TOKEN.search(text)
    assert not ROLE_LINE.search(text)
    assert block.count("</memory>") == 1 and block.endswith("\n</memory>")
    assert_items_hold_no_markup(block)


# --- Each item: nothing in it is markup ----------------------------------------------

_ANGLE_NAME = re.compile(r"ANGLE BRACKET|ANGLE QUOTATION MARK|(?:LESS|GREATER)-THAN BRACKET")
_BARE_RELATION_NAME = re.compile(r"(?:LESS|GREATER)-THAN(?: SIGN)?$")
# Relations drawn with more than a chevron (≤, ≶, ⪕, ⥷, APL's quad) read as maths.
_COMPOUND_RELATION_NAME = re.compile(r" OR | NOR |EQUAL|SIMILAR|ARROW|APL")
_DEFAULT_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")
_MARKUP_ASCII = set("<>&")
# Drawn like "<", ">" (or, U+FF5C, like the bar of DeepSeek's "<｜User｜>") but in
# neither the confusables data nor the names above: ≺ ≻, ˱ ˲, ᐊ ᐅ, ｜.
_SHAPE_LOOK_ALIKES = frozenset("\u227a\u227b\u02f1\u02f2\u140a\u1405\uff5c")


@functools.cache
def _confusable_with_markup() -> frozenset[str]:
    found: set[str] = set()
    for key, glyphs in confusables_data.items():
        group = {key} | {glyph["c"] for glyph in glyphs}
        if group & _MARKUP_ASCII:
            found |= {char for char in group if len(char) == 1}
    return frozenset(found)


@functools.cache
def dropped_characters() -> frozenset[str]:
    """Characters that draw nothing: default-ignorable code points, control characters
    other than tab and line breaks, interlinear annotation marks, object replacement."""
    found = {chr(cp) for cp in range(sys.maxunicode + 1) if _DEFAULT_IGNORABLE.match(chr(cp))}
    found |= {chr(cp) for cp in range(0xFFF9, 0xFFFD)}
    controls = [chr(cp) for cp in [*range(0x20), *range(0x7F, 0xA0)]]
    found |= {char for char in controls if char != "\t" and char.splitlines() == [char]}
    return frozenset(found)


@functools.cache
def markup_characters() -> frozenset[str]:
    """Every visible character a reader could take for "<", ">" or "&" (or a chat
    token's fullwidth bar)."""
    found = set()
    for cp in range(sys.maxunicode + 1):
        char = chr(cp)
        name = unicodedata.name(char, "")
        if (
            _MARKUP_ASCII & set(unicodedata.normalize("NFKC", char))
            or _MARKUP_ASCII & set(unicodedata.normalize("NFD", char))
            or char in _confusable_with_markup()
            or char in _SHAPE_LOOK_ALIKES
            or _ANGLE_NAME.search(name)
            or (_BARE_RELATION_NAME.search(name) and not _COMPOUND_RELATION_NAME.search(name))
        ):
            found.add(char)
    return frozenset(found) - dropped_characters()


_ENTITY = re.compile(r"&(?:[A-Za-z]+|#x[0-9A-Fa-f]+|#[0-9]+);")
BRACKET_WORD = re.compile(r"\[/?[A-Za-z_][A-Za-z0-9_]*\]")
_TAG_FLAGS = [
    "\U0001f3f4" + "".join(chr(0xE0000 + ord(c)) for c in region) + "\U000e007f"
    for region in ("gbeng", "gbsct", "gbwls")
]
_SELECTORS = re.compile("[\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _needed(text: str, index: int) -> bool:
    """Whether the invisible character at ``index`` is one text needs: a variation
    selector on a visible character, a joiner inside a non-ASCII word or emoji."""
    char = text[index]
    before = text[index - 1] if index else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    if _SELECTORS.match(char):
        return bool(before) and not before.isspace() and before not in dropped_characters()
    if char in "\u200c\u200d":
        if before and unicodedata.combining(before) == 9:  # canonical combining class Virama
            return True
        return (
            bool(before and after)
            and not (before.isascii() or after.isascii())
            and after not in dropped_characters()
            and (before not in dropped_characters() or bool(_SELECTORS.match(before)))
        )
    return False


def _lingering_invisibles(text: str) -> list[str]:
    """Characters that draw nothing left where no text needs them."""
    for flag in _TAG_FLAGS:
        text = text.replace(flag, "\U0001f3f4")
    return [
        f"U+{ord(char):04X} at {index}"
        for index, char in enumerate(text)
        if char in dropped_characters() and not _needed(text, index)
    ]


def item_markup(content: str) -> list[str]:
    """What in an item's rendered content could be read as markup, or hides from a reader."""
    found = [
        f"{char!r} (U+{ord(char):04X})" for char in content if char in markup_characters() - {"&"}
    ]
    for match in re.finditer("&", content):
        entity = _ENTITY.match(content, match.start())
        if not entity:
            found.append(f"bare & at {match.start()}")
        elif html.unescape(entity.group()) not in markup_characters() | {"["}:
            found.append(f"entity {entity.group()} is not one of ours")
    found += [f"control word {word}" for word in BRACKET_WORD.findall(content)]
    found += [f"invisible {where}" for where in _lingering_invisibles(content)]
    return found


def assert_items_hold_no_markup(block: str) -> None:
    item_start = re.compile(r"- \[(?:" + "|".join(MEMORY_TYPES) + r")\] ")
    for line in block.split("\n")[PREAMBLE_LINES:-1]:
        content = item_start.sub("", line, count=1)
        assert not item_markup(content), f"markup in {line[:80]!r}: {item_markup(content)[:5]}"
