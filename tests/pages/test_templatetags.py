from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memories.templatetags.pages import percent_of, relative, when

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
