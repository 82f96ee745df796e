"""Pages show the characters the block drops, so the owner sees what was stored."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.urls import reverse

from memories.models import Memory
from memories.templatetags.pages import show_invisible
from tests.base import make_memory


def tags(text: str) -> str:
    return "".join(chr(0xE0000 + ord(char)) for char in text)


HIDDEN = "Alice likes green tea." + tags("Ok") + "\u202e"
MARKS = (
    '<span class="invisible-char" title="U+E004F TAG LATIN CAPITAL LETTER O">⟨U+E004F⟩</span>'
    '<span class="invisible-char" title="U+E006B TAG LATIN SMALL LETTER K">⟨U+E006B⟩</span>'
    '<span class="invisible-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>'
)


def test_it_marks_each_character_the_block_drops():
    assert show_invisible(HIDDEN) == "Alice likes green tea." + MARKS


def test_it_escapes_the_text_around_the_marks():
    html = show_invisible("<script>x</script>\u200b&")
    assert html == (
        "&lt;script&gt;x&lt;/script&gt;"
        '<span class="invisible-char" title="U+200B ZERO WIDTH SPACE">⟨U+200B⟩</span>&amp;'
    )
    assert show_invisible("<b>no invisibles</b>") == "&lt;b&gt;no invisibles&lt;/b&gt;"
    rendered = Template("{% load pages %}{{ text|show_invisible }}").render(
        Context({"text": '"><img src=x>\x00'})
    )
    assert rendered == (
        "&quot;&gt;&lt;img src=x&gt;"
        '<span class="invisible-char" title="U+0000 CONTROL CHARACTER">⟨U+0000⟩</span>'
    )


def test_it_leaves_the_invisible_characters_text_needs_alone():
    family = "👨\u200d👩\u200d👧 ❤\ufe0f می\u200cخواهم"
    scotland = "🏴" + tags("gbsct") + "\U000e007f"
    assert show_invisible(family) == family
    assert show_invisible(scotland) == scotland
    assert show_invisible(None) == ""


@pytest.mark.django_db
@pytest.mark.parametrize(
    "page", ["memory-list", "memory-detail", "memory-edit", "memory-archive", "home"]
)
def test_it_shows_them_on_every_page_that_shows_an_active_memory(alice_client, alice, page):
    first = make_memory(alice, "Alice likes tea.")
    head = first.supersede(HIDDEN, actor=alice)  # an event for the home page
    url = reverse(page) if page in ("memory-list", "home") else reverse(page, args=[head.pk])
    body = alice_client.get(url).content.decode()
    assert MARKS in body
    if page != "memory-edit":  # the edit form's text area holds the text as stored
        assert tags("Ok") not in body


@pytest.mark.django_db
def test_it_shows_them_in_the_chain_and_its_word_changes(alice_client, alice):
    first = make_memory(alice, "Alice likes tea.")
    second = first.supersede("Alice likes" + tags("X") + " green tea.", actor=alice)
    body = alice_client.get(reverse("memory-detail", args=[second.pk])).content.decode()
    mark = (
        '<span class="invisible-char" title="U+E0058 TAG LATIN CAPITAL LETTER X">⟨U+E0058⟩</span>'
    )
    assert body.count(mark) == 2  # the heading, and the word changes of the second version
    assert f"<ins>{mark} green</ins>" in body
    assert tags("X") not in body


@pytest.mark.django_db
def test_it_shows_them_in_the_review_queue(alice_client, alice):
    Memory.propose(alice, HIDDEN, "semantic")
    body = alice_client.get(reverse("queue")).content.decode()
    assert MARKS in body


@pytest.mark.django_db
def test_it_shows_them_in_the_inspector_but_not_in_the_block(alice_client, alice):
    make_memory(alice, HIDDEN, entities=["Alice"])
    response = alice_client.post(
        reverse("inspect"),
        {"message": "Does Alice like green tea?", "pipeline": "fusion", "budget": 1024},
    )
    body = response.content.decode()
    assert MARKS in body
    block = response.context["result"].block
    assert "Alice likes green tea." in block
    assert not set(block) & set(tags("Ok") + "\u202e")
