"""The pages apply the model's limits: a form error beside the field, and the
fields carry the same numbers as maxlength (never a number of their own)."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.urls import reverse

from memories.forms import ENTITIES_LINE_MAX_CHARS
from memories.models import (
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_REASON_CHARS,
    MAX_SEARCH_CHARS,
    Memory,
)
from tests.base import make_memory
from tests.pages.conftest import flashes

pytestmark = pytest.mark.django_db

TOO_MANY = ", ".join(f"name {n}" for n in range(MAX_ENTITIES + 1))
TOO_LONG = "x" * (MAX_ENTITY_CHARS + 1)


def maxlengths(html: str, name: str) -> set[int]:
    tags = re.findall(rf"<(?:input|textarea)[^>]*\bname=\"{name}\"[^>]*>", html)
    assert tags, f"no field {name}"
    return {int(re.search(r'maxlength="(\d+)"', tag).group(1)) for tag in tags}


@pytest.mark.parametrize(
    "entities, message",
    [(TOO_MANY, f"At most {MAX_ENTITIES} entities"), (TOO_LONG, "An entity is at most")],
)
def test_it_refuses_entities_over_the_limits_when_adding(alice_client, entities, message):
    response = alice_client.post(
        reverse("memory-add"), {"content": "Likes tea.", "type": "semantic", "entities": entities}
    )
    assert response.status_code == 400
    assert message in response.context["form"].errors["entities"][0]
    assert not Memory.objects.exists()


@pytest.mark.parametrize("status", ["active", "proposed"])
def test_it_refuses_entities_over_the_limits_when_editing(alice_client, alice, status):
    memory = make_memory(alice, "Likes tea.", status=status)
    response = alice_client.post(
        reverse("memory-edit", args=[memory.pk]),
        {"content": "Likes green tea.", "type": "semantic", "entities": TOO_MANY},
    )
    assert f"At most {MAX_ENTITIES} entities" in response.context["form"].errors["entities"][0]
    assert Memory.objects.count() == 1


def test_it_accepts_the_most_entities_on_one_line(alice_client, alice):
    names = [f"{n:03d}" + "x" * (MAX_ENTITY_CHARS - 3) for n in range(MAX_ENTITIES)]
    line = ", ".join(names)
    assert len(line) <= ENTITIES_LINE_MAX_CHARS
    response = alice_client.post(
        reverse("memory-add"), {"content": "Likes tea.", "type": "semantic", "entities": line}
    )
    assert response.status_code == 302
    assert Memory.objects.get().entity_refs == names


def test_it_keeps_a_reason_as_long_as_the_api_does(alice_client, alice):
    memory = make_memory(alice, "Likes tea.", status=Memory.Status.PROPOSED)
    reason = "r" * MAX_REASON_CHARS
    alice_client.post(reverse("memory-reject", args=[memory.pk]), {"reason": reason})
    assert memory.events.get().reason == reason


def test_it_refuses_a_reason_over_the_limit_when_editing(alice_client, alice):
    memory = make_memory(alice, "Likes tea.")
    response = alice_client.post(
        reverse("memory-edit", args=[memory.pk]),
        {
            "content": "Likes green tea.",
            "type": "semantic",
            "entities": "",
            "reason": "r" * (MAX_REASON_CHARS + 1),
        },
    )
    assert "At most" in response.context["form"].errors["reason"][0]
    assert Memory.objects.count() == 1


def test_it_fits_a_duplicate_note_and_a_full_reason_within_the_limit(alice_client, alice):
    kept = make_memory(alice, "Likes tea.")
    memory = make_memory(alice, "Likes tea!", status=Memory.Status.PROPOSED)
    alice_client.post(
        reverse("memory-reject", args=[memory.pk]),
        {"reason": "r" * MAX_REASON_CHARS, "duplicate_of": kept.pk},
    )
    memory.refresh_from_db()
    assert memory.status == Memory.Status.REJECTED
    reason = memory.events.get().reason
    assert reason.startswith(f"Duplicate of memory {kept.pk}")
    assert len(reason) == MAX_REASON_CHARS


def test_it_searches_up_to_the_limit(alice_client, alice):
    make_memory(alice, "Likes tea.")
    at_limit = alice_client.get(reverse("memory-list"), {"q": "tea" + " " * (MAX_SEARCH_CHARS - 3)})
    assert not at_limit.context["invalid"]
    assert len(at_limit.context["memories"]) == 1
    over = alice_client.get(reverse("memory-list"), {"q": "t" * (MAX_SEARCH_CHARS + 1)})
    assert over.context["invalid"]
    assert "At most" in over.context["form"].errors["q"][0]


def test_it_filters_by_entity_ignoring_spacing(alice_client, alice):
    wanted = make_memory(alice, "Lives in Berlin Mitte.", entities=["Berlin Mitte"])
    make_memory(alice, "Lives in Berlin.", entities=["Berlin"])
    response = alice_client.get(reverse("memory-list"), {"entity": " berlin   MITTE"})
    assert list(response.context["memories"]) == [wanted]


def test_it_gives_the_fields_the_model_limits(alice_client, alice):
    proposal = make_memory(alice, "Likes tea.", status=Memory.Status.PROPOSED)
    queue = alice_client.get(reverse("queue")).content.decode()
    assert maxlengths(queue, "reason") == {MAX_REASON_CHARS}
    detail = alice_client.get(reverse("memory-detail", args=[proposal.pk])).content.decode()
    assert maxlengths(detail, "reason") == {MAX_REASON_CHARS}
    edit = alice_client.get(reverse("memory-edit", args=[proposal.pk])).content.decode()
    assert maxlengths(edit, "reason") == {MAX_REASON_CHARS}
    assert maxlengths(edit, "content") == {settings.MAX_CONTENT_CHARS}
    assert maxlengths(edit, "entities") == {ENTITIES_LINE_MAX_CHARS}
    listing = alice_client.get(reverse("memory-list")).content.decode()
    assert maxlengths(listing, "q") == {MAX_SEARCH_CHARS}
    assert maxlengths(listing, "entity") == {MAX_ENTITY_CHARS}


def test_it_gives_the_bulk_reject_page_the_reason_limit(alice_client, alice):
    ids = [make_memory(alice, f"Fact {n}.", status=Memory.Status.PROPOSED).pk for n in range(2)]
    response = alice_client.post(reverse("queue-bulk"), {"action": "reject", "ids": ids})
    assert maxlengths(response.content.decode(), "reason") == {MAX_REASON_CHARS}


def test_it_says_an_unchanged_edit_wrote_nothing(alice_client, alice):
    memory = make_memory(alice, "Likes tea.", entities=["tea"])
    response = alice_client.post(
        reverse("memory-edit", args=[memory.pk]),
        {"content": "Likes tea.", "type": "semantic", "entities": ""},
        follow=True,
    )
    assert flashes(response) == ["Nothing changed, so no new version was written."]
    assert Memory.objects.count() == 1
    assert not memory.events.exists()


def test_it_shows_a_rule_the_form_did_not_know_beside_its_field(alice_client, alice, settings):
    # The form read the content limit when it was defined; the model reads it now.
    settings.MAX_CONTENT_CHARS = 20
    response = alice_client.post(
        reverse("memory-add"), {"content": "x" * 21, "type": "semantic", "entities": ""}
    )
    assert response.status_code == 400
    assert "At most 20 characters" in response.context["form"].errors["content"][0]
    assert not Memory.objects.exists()
    memory = make_memory(alice, "Likes tea.")
    response = alice_client.post(
        reverse("memory-edit", args=[memory.pk]),
        {"content": "y" * 21, "type": "semantic", "entities": ""},
    )
    assert "At most 20 characters" in response.context["form"].errors["content"][0]
    assert Memory.objects.count() == 1
