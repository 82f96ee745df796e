"""A memory has text a reader can see: content made only of spaces and invisible
characters is refused by the model, so every way in (API, pages, import,
extraction, consolidation) refuses it too."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memories.extraction import Turn, extract
from memories.models import BlankContent, Memory, has_visible_text
from tests.base import make_memory
from tests.fakes.fixtures import fake_llm, fake_openai  # noqa: F401
from tests.fakes.openai_server import CHAT, chat_answer

TAG_A = "\U000e0041"  # an invisible "A" (Unicode tag character)

INVISIBLE = [
    "\u200b\u2060\ufeff",  # zero-width space, word joiner, BOM
    " \t\n\u00a0\u3000",  # ASCII and Unicode spaces
    " " + TAG_A + "\U000e0020" + "\U000e007f",  # tag characters between spaces
    "\u202e\u2066\u2069\u200e",  # bidi controls
    "\u00ad\u034f\ufe0f\u180e",  # soft hyphen, grapheme joiner, variation selector
    "\u3164\u115f\uffa0\u2800",  # Hangul fillers and the blank braille cell
    "\x00\x07\x1b",  # controls
    "\u0301\u20dd",  # marks with nothing to sit on
    "",
]

VISIBLE = [
    "a",
    "Tom & Jerry",
    "\u200bLikes tea\u200b",
    "\U0001f600",
    "\u4e2d",
    "\u0627",  # Arabic alef
    "e\u0301",
    "\U0001f468\u200d\U0001f469",  # emoji joined by ZWJ
]


@pytest.mark.parametrize("text", INVISIBLE)
def test_it_sees_nothing_in_invisible_text(text):
    assert not has_visible_text(text)


@pytest.mark.parametrize("text", VISIBLE)
def test_it_sees_something_in_visible_text(text):
    assert has_visible_text(text)


def test_it_counts_private_use_as_visible_only_with_the_drawn_ones():
    # Private use characters draw nothing the owner can read; with a letter they pass.
    assert not has_visible_text("\ue000")
    assert has_visible_text("\ue000x")


@pytest.mark.django_db
@pytest.mark.parametrize("text", INVISIBLE[:4])
def test_it_refuses_blank_content_in_every_constructor(alice, text):
    with pytest.raises(BlankContent):
        Memory.remember(alice, text, "semantic")
    with pytest.raises(BlankContent):
        Memory.propose(alice, text, "semantic")
    memory = make_memory(alice, "Likes tea.")
    other = make_memory(alice, "Likes green tea.")
    with pytest.raises(BlankContent):
        memory.supersede(text)
    with pytest.raises(BlankContent):
        Memory.merge([memory, other], text)
    assert Memory.objects.count() == 2
    assert set(Memory.objects.values_list("status", flat=True)) == {"active"}


@pytest.mark.django_db
def test_it_keeps_the_content_of_a_supersede_that_changes_only_the_type(alice):
    memory = make_memory(alice, "Likes tea.")
    assert memory.supersede(type="preference").content == "Likes tea."


@pytest.mark.django_db
def test_it_reports_an_invisible_line_of_an_import(alice, tmp_path):
    path = tmp_path / "in.jsonl"
    lines = [
        {"content": "Likes tea.", "type": "semantic"},
        {"content": "\u200b\u2060\ufeff", "type": "semantic"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    err = StringIO()
    with pytest.raises(CommandError, match="1 lines failed"):
        call_command("import_memories", str(path), "--owner", "alice", stderr=err)
    assert err.getvalue().startswith("line 2: content has no visible text")
    assert list(Memory.objects.values_list("content", flat=True)) == ["Likes tea."]


@pytest.mark.django_db
def test_it_drops_an_invisible_fact_from_extraction(fake_llm, alice):  # noqa: F811
    turns = [Turn("user", "I like tea.", None)]
    fake_llm.queue(
        CHAT,
        chat_answer(
            {
                "facts": [
                    {
                        "type": "semantic",
                        "content": "\u200b" + TAG_A,
                        "entities": [],
                        "confidence": 0.9,
                        "turn": 0,
                    },
                    {
                        "type": "preference",
                        "content": "Likes tea.",
                        "entities": [],
                        "confidence": 0.9,
                        "turn": 0,
                    },
                ]
            }
        ),
    )
    result = extract(alice, "s", "turn_end", turns)
    assert [memory.content for memory in result.written] == ["Likes tea."]
