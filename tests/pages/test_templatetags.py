from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import Memory
from memories.templatetags.pages import (
    TITLE_MAX_CHARS,
    highlight,
    is_titled,
    percent_of,
    relative,
    short_title,
    source_label,
    type_name,
    via_label,
    when,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_it_says_how_long_ago():
    assert relative(NOW - timedelta(days=3, hours=2), NOW) == "3\xa0days ago"
    assert relative(NOW - timedelta(minutes=5), NOW) == "5\xa0minutes ago"
    assert relative(NOW - timedelta(seconds=10), NOW) == "just now"
    assert relative(NOW + timedelta(hours=2), NOW) == "in 2\xa0hours"
    assert relative(None) == ""


def test_it_shows_times_in_the_owners_time_zone(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    with timezone.override("Europe/Berlin"):
        html = when(datetime(2026, 7, 1, 10, 30, tzinfo=UTC))
    assert "1 Jul 2026, 12:30 CEST" in html
    assert 'datetime="2026-07-01T10:30:00+00:00"' in html
    assert 'class="relative"' in html


def test_it_says_never_for_a_missing_time():
    assert "never" in when(None)
    assert "never used" in when(None, "never used")


@pytest.mark.parametrize(
    ("value", "whole", "expected"), [(0.5, 1, 50.0), (3, 2, 100.0), (-1, 2, 0.0), (1, 0, 0.0)]
)
def test_it_makes_bar_widths(value, whole, expected):
    assert percent_of(value, whole) == expected


@pytest.mark.django_db
def test_it_uses_the_browsers_time_zone_when_it_sent_one(alice_client, alice):
    memory = Memory.propose(alice, "Alice is in Tokyo.", "semantic")
    Memory.objects.filter(pk=memory.pk).update(created_at=datetime(2026, 1, 10, 20, 0, tzinfo=UTC))
    alice_client.cookies["timothy_tz"] = "Asia/Tokyo"
    body = alice_client.get(reverse("queue")).content.decode()
    assert "11 Jan 2026, 05:00 JST" in body
    assert "times in JST" in body


@pytest.mark.django_db
@pytest.mark.parametrize("cookie", ["Not/AZone", "../../etc/passwd", "x" * 100, ""])
def test_it_ignores_a_time_zone_it_does_not_know(alice_client, settings, cookie):
    alice_client.cookies["timothy_tz"] = cookie
    response = alice_client.get(reverse("home"))
    assert response.status_code == 200
    assert f"times in {settings.TIME_ZONE}" in response.content.decode()


def test_it_titles_a_long_memory_by_its_first_line_or_sentence():
    assert short_title("Short memory.") == "Short memory."
    assert not is_titled("Short memory.")
    assert short_title("First line\nsecond line") == "First line"
    assert is_titled("First line\nsecond line")
    long = "A sentence that ends here. " + "More words follow. " * 40
    assert short_title(long) == "A sentence that ends here."
    words = "word " * 100
    title = short_title(words)
    assert title.endswith("…") and len(title) <= TITLE_MAX_CHARS
    assert title.rstrip("…").split() == ["word"] * len(title.rstrip("…").split())


def test_it_highlights_matches_escaped():
    assert (
        highlight("Loves <i>pastéis</i>", "pasteis")
        == "Loves &lt;i&gt;<mark>pastéis</mark>&lt;/i&gt;"
    )
    assert highlight("nothing here", "pasteis") == "nothing here"
    assert highlight("a < b", "") == "a &lt; b"


def test_it_names_types_sources_and_channels_one_way():
    assert type_name("semantic") == "Fact (semantic)"
    assert type_name("episodic") == "Event (episodic)"
    assert type_name("preference") == "Preference"
    assert type_name("unknown") == "unknown"
    assert source_label("api") == "API"
    assert source_label("remember") == "Remember"
    assert via_label("api") == "API"
    assert via_label("page") == "these pages"
    assert via_label("robot") == "robot"
