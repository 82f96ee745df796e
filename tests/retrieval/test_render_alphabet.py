"""The tables in retrieval/render.py, derived again from the Unicode data.

They are written out in the module so that nothing but the standard library is
needed at run time; these tests fail when they drift from the data (a new
Python brings a new Unicode version), and say which characters differ."""

from __future__ import annotations

import html
import sys
import unicodedata

from retrieval.render import ENTITIES, ESCAPED_CHARACTERS, escape_content, invisible_positions
from tests.retrieval.fence_oracle import dropped_characters, markup_characters


def describe(chars: set[str]) -> list[str]:
    return sorted(f"U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in chars)


def test_it_escapes_exactly_the_characters_read_as_angle_brackets_or_ampersands():
    escaped = set(ESCAPED_CHARACTERS)
    assert len(escaped) == len(ESCAPED_CHARACTERS), "a character is listed twice"
    derived = markup_characters()
    assert not describe(derived - escaped), "missing from ESCAPED_CHARACTERS"
    assert not describe(escaped - derived), "not read as markup, yet escaped"
    for char in "<>&＜﹤‹›«»〈〉《》⟨⟩⟪⟫❮❯ᐸᐳ":
        assert char in escaped, char
    # escape_content takes a shortcut for ASCII text that knows only these three.
    assert {char for char in escaped if char.isascii()} == set("&<>")


def test_it_gives_every_escaped_character_an_entity_that_reads_back_as_itself():
    for char, entity in ENTITIES.items():
        assert entity.startswith("&") and entity.endswith(";")
        assert html.unescape(entity) == char
    assert ENTITIES["<"] == "&lt;" and ENTITIES[">"] == "&gt;" and ENTITIES["&"] == "&amp;"


def test_it_drops_exactly_the_characters_that_draw_nothing():
    # Each character stands alone after a space, where no text needs a joiner, a
    # variation selector or a tag character.
    chars = [
        chr(cp)
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) != "Cs" and chr(cp).splitlines() == [chr(cp)]
    ]
    text = "".join(" " + char for char in chars)
    dropped = {text[index] for index in invisible_positions(text)}
    expected = {char for char in dropped_characters() if char.splitlines() == [char]}
    assert not describe(expected - dropped), "drawn nothing, yet kept"
    assert not describe(dropped - expected), "dropped, yet visible"
    for char in "\u200b\u200e\u202e\u2066\u2060\ufeff\u00ad\U000e0041\U000e007f\ufffc":
        assert escape_content(f"a{char}b") == "ab", f"U+{ord(char):04X}"
