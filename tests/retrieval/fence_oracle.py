"""An independent reading of rendered blocks, for the fence tests.

It shares no code or tables with retrieval/render.py: the whole block is
normalised with NFKC, Unicode tag characters are decoded to the ASCII they
mirror, everything invisible is removed, and look-alikes are folded with the
confusable_homoglyphs package's copy of Unicode's confusables data. Then the
fence tags, chat-template tokens and line structure are checked on what is left.
"""

from __future__ import annotations

import re
import unicodedata

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
