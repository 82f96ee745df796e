"""Entities found in a memory's text: the pure rules (retrieval/entities.py)."""

import pytest

from memories.proper_nouns import known_names_in, proper_noun_spans
from retrieval.entities import EntityFinder, find_entities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My sister Ana lives in Lisbon.", ["Ana", "Lisbon"]),
        ("Her cat Biscuit was adopted from the Celia Hammond Animal Trust.",
         ["Biscuit", "Celia Hammond Animal Trust"]),
        ("Works at the Bank of England in London.", ["Bank of England", "London"]),
        ("Owen's birthday is 3 November.", ["Owen"]),
        ("Jonah Weiss is a book conservator.", ["Jonah Weiss"]),
        ("Visited Arjun and Meera in Berlin.", ["Arjun", "Meera", "Berlin"]),
        ("Before Fernwood she worked at the BBC.", ["Fernwood", "BBC"]),
        ("Rent on the Clapton flat is due on Monday.", ["Clapton"]),
        ("Uses an iPhone 13 and 1Password.", ["iPhone 13", "1Password"]),
        ("Tracks her runs on a Garmin Forerunner 255.", ["Garmin Forerunner 255"]),
        ("I think the UX is fine; my PB is 24:51.", []),
        ("Started a new job in January.", []),
        ("Goes to Regent's Park and Lily's Kitchen.", ["Regent's Park", "Lily's Kitchen"]),
    ],
)  # fmt: skip
def test_it_finds_proper_nouns(text, expected):
    assert proper_noun_spans(text) == expected


def test_it_keeps_a_sentence_opener_the_text_capitalises_elsewhere_too():
    assert proper_noun_spans("Morag called. I wrote back to Morag.") == ["Morag", "Morag"]
    assert proper_noun_spans("Called the plumber.") == []


def test_it_finds_known_names_whatever_their_case():
    assert known_names_in("dinner with ANA and the dr. okafor crew", {"ana", "dr. okafor"}) == [
        "dr. okafor",
        "ANA",
    ]
    assert known_names_in("banana bread", {"ana"}) == []


def test_it_puts_known_names_first_and_drops_repeats():
    assert find_entities("Lunch with ana and Ana in Porto.", {"ana"}) == ["ana", "Porto"]


def test_a_finder_learns_names_as_it_goes():
    finder = EntityFinder()
    assert finder.find("Her brother is Arjun Natarajan.") == ["Arjun Natarajan"]
    finder.learn(["Arjun Natarajan", "Arjun"])
    assert finder.find("arjun rang about the flat.") == ["arjun"]


def test_it_takes_any_text():
    for text in ["", "   ", "!!!", "x" * 5000, "Ünïcödé Namé lives in Zürich", "日本語 Tokyo"]:
        found = find_entities(text, {"zürich"})
        assert all(isinstance(name, str) and name for name in found)
