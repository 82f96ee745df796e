"""Text search of the memory list: accent- and case-insensitive words, or full text."""

from __future__ import annotations

import pytest
from django.db import connection

from memories.matching import fold, highlight_spans, search_terms, term_pattern
from memories.models import Memory
from tests.base import make_memory

SAMPLES = [
    "Pastéis de nata",
    "ÆRØSKØBING og Ærø",
    "Straße, Łódź, Đakovo, Þórsmörk, Œuvre",
    "İstanbul and ıspanak",
    "ﬁnance in Ｔｏｋｙｏ, ①, ²",
    "Crème brûlée façade naïve coöperate",
    "Phở bò ở Hà Nội",
    "Ελληνικά: άλφα ΐ ΰ",
    "Ёлка и йогурт",
    "مَرْحَبًا بِكُمْ",
    "שָׁלוֹם עֲלֵיכֶם",
    "e\u0301 and a\u0308 decomposed",
    "日本語のテキスト ｶﾀｶﾅ",
    "emoji 👩🏽‍💻 and tabs\tand\nlines",
]


def contains_in_postgresql(text: str, search: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s ~ %s", [text, term_pattern(fold(search))])
        return cursor.fetchone()[0]


@pytest.mark.django_db
@pytest.mark.parametrize("text", SAMPLES)
def test_it_finds_in_postgresql_what_folding_finds_in_python(text):
    # Every word of the sample, and of its folded form, is found in it by the
    # database's pattern, whatever the spelling of the search.
    for word in text.split():
        for search in {word, fold(word), word.upper(), fold(word).upper()}:
            assert contains_in_postgresql(text, search), (text, search)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "search", "found"),
    [
        ("Pastéis de nata", "pasteis", True),
        ("PASTÉIS", "pastéis", True),
        ("Straße", "strasse", True),
        ("STRASSE", "straße", True),
        ("Ærø", "aero", True),
        ("ﬁnance", "finance", True),
        ("Ｔｏｋｙｏ", "tokyo", True),
        ("مَرْحَبًا", "مرحبا", True),
        ("100% sure", "100%", True),
        ("a.b", "a.b", True),
        ("axb", "a.b", False),
        ("pastries", "pasteis", False),
        ("tea [green]", "[green]", True),
        ("back\\slash", "k\\s", True),
    ],
)
def test_it_matches_spellings_in_postgresql(text, search, found):
    assert contains_in_postgresql(text, search) is found
    assert (fold(search) in fold(text)) is found


def test_it_folds_accents_case_and_ligatures():
    assert fold("Pastéis") == "pasteis"
    assert fold("STRASSE") == fold("Straße") == "strasse"
    assert fold("Ærø") == "aero"
    assert fold("ﬁle") == "file"


def test_it_reads_words_phrases_and_exclusions():
    terms = search_terms('Pastéis "de   nata" -café or Lisbon, -"bad day"')
    assert terms.include == ["pasteis", "de nata", "lisbon"]
    assert terms.exclude == ["cafe", "bad day"]
    assert search_terms("  ").include == []
    assert search_terms("-").include == ["-"]


def test_it_finds_the_spans_to_highlight_in_the_original_text():
    text = "Loves PASTÉIS de nata; pastéis again"
    spans = highlight_spans(text, "pasteis nata")
    assert [text[start:end] for start, end in spans] == ["PASTÉIS", "nata", "pastéis"]


def test_it_keeps_a_decomposed_accent_with_its_letter_and_merges_overlaps():
    text = "Cafe\u0301 au lait"
    assert [text[a:b] for a, b in highlight_spans(text, "cafe")] == ["Cafe\u0301"]
    assert highlight_spans("abcdef", "abc bcd") == [(0, 4)]
    assert highlight_spans("abc", "") == []


@pytest.fixture
def pastries(alice):
    return {
        "nata": make_memory(alice, "Loves pastéis de nata from Belém."),
        "coffee": make_memory(alice, "Drinks CAFÉ com leite every morning."),
        "seats": make_memory(alice, "Prefers aisle seats on long flights."),
    }


def matching(owner, text: str) -> set[int]:
    return set(Memory.objects.for_owner(owner).matching(text).values_list("pk", flat=True))


@pytest.mark.django_db
def test_it_matches_ignoring_accents_and_case(alice, pastries):
    assert matching(alice, "pasteis") == {pastries["nata"].pk}
    assert matching(alice, "BELEM") == {pastries["nata"].pk}
    assert matching(alice, "café") == matching(alice, "cafe") == {pastries["coffee"].pk}


@pytest.mark.django_db
def test_it_needs_every_word_and_none_of_the_excluded(alice, pastries):
    assert matching(alice, "pasteis belem") == {pastries["nata"].pk}
    assert matching(alice, "pasteis coffee") == set()
    assert matching(alice, "every -leite") == set()
    assert matching(alice, '"de nata"') == {pastries["nata"].pk}


@pytest.mark.django_db
def test_it_still_matches_stemmed_full_text(alice, pastries):
    assert matching(alice, "seat") == {pastries["seats"].pk}
    assert matching(alice, "flight or morning") == {pastries["seats"].pk, pastries["coffee"].pk}


@pytest.mark.django_db
def test_it_treats_like_wildcards_as_text(alice, pastries):
    scored = make_memory(alice, "Scored 100% on the test_run.")
    assert matching(alice, "100%") == {scored.pk}
    assert matching(alice, "%") == {scored.pk}
    assert matching(alice, "t_r") == {scored.pk}
