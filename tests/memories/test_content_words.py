"""A memory says something: content with no word in it (a lone letter, punctuation,
an emoji) is refused by the model, so the API, the pages, import and extraction
refuse it alike, with one sentence."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from memories.extraction import Turn, extract
from memories.models import InvalidMemory, Memory, has_a_word
from tests.base import make_memory
from tests.fakes.fixtures import fake_llm, fake_openai  # noqa: F401
from tests.fakes.openai_server import CHAT, chat_answer

NO_WORD = "Content must say something: at least one word (two letters or digits in a row)."

WORDLESS = ["x", "?", "!!!", "x y", "-- . --", "\U0001f600", "$5", "a.", "\u0627"]
WORDED = [
    "Likes tea.",
    "ok",
    "42",
    "x1",
    "\u4e2d",  # one Han ideograph is a word
    "\ud55c",  # one Hangul syllable is a word
    "\u0915\u093f\u0924\u093e\u092c",  # Devanagari with a vowel sign inside the word
    "Caf\u00e9",
    "[redacted]",
]


@pytest.mark.parametrize("text", WORDLESS)
def test_it_finds_no_word(text):
    assert not has_a_word(text)


@pytest.mark.parametrize("text", WORDED)
def test_it_finds_a_word(text):
    assert has_a_word(text)


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["x", "?!", "\U0001f600"])
def test_it_refuses_wordless_content_in_every_constructor(alice, text):
    memory = make_memory(alice, "Likes tea.")
    other = make_memory(alice, "Likes green tea.")
    for attempt in (
        lambda: Memory.remember(alice, text, "semantic"),
        lambda: Memory.propose(alice, text, "semantic"),
        lambda: memory.supersede(text),
        lambda: Memory.merge([memory, other], text),
    ):
        with pytest.raises(InvalidMemory) as refused:
            attempt()
        assert (refused.value.field, refused.value.message) == ("content", NO_WORD)
    assert Memory.objects.count() == 2


@pytest.mark.django_db
def test_it_shows_the_sentence_on_the_add_page(client, alice):
    client.force_login(alice)
    response = client.post(reverse("memory-add"), {"content": "x", "type": "semantic"})
    assert response.status_code == 400
    assert NO_WORD in response.content.decode()
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_it_reports_a_wordless_line_of_an_import(alice, tmp_path):
    path = tmp_path / "in.jsonl"
    lines = [{"content": "Likes tea.", "type": "semantic"}, {"content": "x", "type": "semantic"}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    err = StringIO()
    with pytest.raises(CommandError, match="1 lines failed"):
        call_command("import_memories", str(path), "--owner", "alice", stderr=err)
    assert err.getvalue().startswith(f"line 2: content: {NO_WORD}")
    assert list(Memory.objects.values_list("content", flat=True)) == ["Likes tea."]


@pytest.mark.django_db
def test_it_drops_a_wordless_fact_from_extraction(fake_llm, alice):  # noqa: F811
    turns = [Turn("user", "I like tea. x", None)]
    facts = [
        {"type": "semantic", "content": "x", "entities": [], "confidence": 0.9, "turn": 0},
        {
            "type": "preference",
            "content": "Likes tea.",
            "entities": [],
            "confidence": 0.9,
            "turn": 0,
        },
    ]
    fake_llm.queue(CHAT, chat_answer({"facts": facts}))
    result = extract(alice, "s", "turn_end", turns)
    assert [memory.content for memory in result.written] == ["Likes tea."]
