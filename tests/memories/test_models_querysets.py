"""The list filters are QuerySet methods, shared by the pages and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def test_it_finds_memories_naming_an_entity_ignoring_case_and_spacing(alice, bob):
    berlin = make_memory(alice, "Lives in Berlin.", entities=["Berlin Mitte", "Germany"])
    make_memory(alice, "Likes tea.", entities=["tea"])
    make_memory(bob, "Lives in Berlin too.", entities=["Berlin Mitte"])
    found = Memory.objects.for_owner(alice).naming("  berlin   MITTE ")
    assert list(found) == [berlin]


def test_it_finds_only_whole_entity_names(alice):
    make_memory(alice, "Lives in Berlin.", entities=["Berlin Mitte"])
    assert not Memory.objects.for_owner(alice).naming("Berlin").exists()


def test_it_finds_memories_matching_words_ignoring_accents(alice):
    pasteis = make_memory(alice, "Loves pastéis de nata.")
    make_memory(alice, "Loves croissants.")
    assert list(Memory.objects.for_owner(alice).matching("PASTEIS")) == [pasteis]


def test_it_lists_the_memories_before_a_position_newest_first(alice):
    now = timezone.now()
    older = make_memory(alice, "One.", created_at=now - timedelta(hours=2))
    tied_low = make_memory(alice, "Two.", created_at=now - timedelta(hours=1))
    tied_high = make_memory(alice, "Three.", created_at=now - timedelta(hours=1))
    make_memory(alice, "Four.", created_at=now)
    page = Memory.objects.for_owner(alice).before(tied_high.created_at, tied_high.pk)
    assert list(page.order_by("-created_at", "-id")) == [tied_low, older]
