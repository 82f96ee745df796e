"""The edit page's "What it is about" fields: a person, pet, organisation or thing
must be named, and a correction is stored as the owner's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import Memory
from tests.base import make_memory


def post(client, memory, **fields):
    data = {
        "content": memory.content,
        "type": memory.type,
        "entities": "",
        "about_subject": "you",
        "about_kind": "self",
        "about_aspect": "home",
        "about_occasion": "",
    }
    return client.post(reverse("memory-edit", args=[memory.pk]), data | fields)


@pytest.mark.django_db
@pytest.mark.parametrize("subject", ["", "you", "  "])
@pytest.mark.parametrize("status", ["active", "proposed"])
def test_it_asks_whom_a_person_is_when_the_subject_is_empty(alice_client, alice, status, subject):
    memory = make_memory(alice, "Lives in Porto.", status=status)
    response = post(alice_client, memory, about_kind="person", about_subject=subject)
    assert response.status_code == 200
    assert response.context["form"].errors["about_subject"] == ["Say whom or what it is about."]
    assert b"Say whom or what it is about." in response.content
    memory.refresh_from_db()
    assert memory.status == status
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_it_refuses_a_kind_that_does_not_exist(alice_client, alice):
    memory = make_memory(alice, "Lives in Porto.")
    response = post(alice_client, memory, about_kind="planet", about_subject="Mars")
    assert response.status_code == 200
    assert "about_kind" in response.context["form"].errors
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_it_stores_the_owners_correction_as_a_new_version(alice_client, alice):
    memory = make_memory(alice, "Lives in Porto.")
    response = post(alice_client, memory, about_kind="person", about_subject="brother")
    memory.refresh_from_db()
    new = memory.superseded_by
    assert response.status_code == 302
    assert new is not None and new.content == "Lives in Porto."
    assert new.about.to_dict() == {
        "subject": "brother",
        "kind": "person",
        "aspect": "home",
        "occasion": "",
        "set_by": "owner",
    }


@pytest.mark.django_db
def test_it_writes_nothing_when_the_about_is_left_as_it_was(alice_client, alice):
    memory = make_memory(alice, "Lives in Porto.")
    response = post(alice_client, memory)
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.status == "active"
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_a_post_without_the_about_fields_keeps_the_about_read_from_the_text(alice_client, alice):
    memory = make_memory(alice, "Lives in Porto.")
    response = alice_client.post(
        reverse("memory-edit", args=[memory.pk]),
        {"content": "My brother lives in Porto.", "type": "semantic", "entities": ""},
    )
    assert response.status_code == 302
    memory.refresh_from_db()
    new = memory.superseded_by
    assert (new.about.subject, new.about.kind, new.about.set_by) == ("brother", "person", "rules")
