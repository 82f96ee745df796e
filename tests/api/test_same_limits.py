"""A memory rule is the model's alone: the API and the pages accept and refuse
the same values, in the same sentence (memories/models.py ``check_*``)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.about import MAX_SUBJECT_CHARS
from memories.models import MAX_ENTITIES, MAX_ENTITY_CHARS, MAX_REASON_CHARS, Memory

# 80 names that are 40 once de-duplicated (case and spacing ignored): within the limit.
REPEATED = [f"Place {n}" for n in range(40)] + [f"  place   {n} " for n in range(40)]
DISTINCT = [f"Place {n}" for n in range(40)]


@pytest.fixture
def page(client, alice):
    client.force_login(alice)
    return client


def api_error(response, field: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["message"] == f"{field}: {error['details'][field][0]}"
    return error["details"][field][0]


def page_error(response, field: str) -> str:
    assert response.status_code in (200, 400)
    return response.context["form"].errors[field][0]


def test_80_entities_that_are_40_are_accepted_by_both(alice_api, page, alice):
    response = alice_api.post(
        "/v1/memories",
        {
            "content": "Has been to many places.",
            "type": "semantic",
            "mode": "remember",
            "entities": REPEATED,
        },
    )
    assert response.status_code == 201, response.text
    assert response.json()["entities"] == DISTINCT
    response = page.post(
        reverse("memory-add"),
        {
            "content": "Has been to many places.",
            "type": "semantic",
            "entities": ", ".join(REPEATED),
        },
    )
    assert response.status_code == 302
    assert [m.entity_refs for m in Memory.objects.order_by("id")] == [DISTINCT, DISTINCT]


def test_an_entity_is_measured_as_stored_by_both(alice_api, page, alice):
    # Over the limit as typed, at it once its inner spaces are single.
    name = "a" + " " * 10 + "b" * (MAX_ENTITY_CHARS - 2)
    body = {"content": "Knows someone.", "type": "semantic"}
    response = alice_api.post("/v1/memories", {**body, "mode": "remember", "entities": [name]})
    assert response.status_code == 201, response.text
    response = page.post(reverse("memory-add"), {**body, "entities": name})
    assert response.status_code == 302
    assert Memory.objects.count() == 2


def test_too_many_entities_are_refused_by_both_in_one_sentence(alice_api, page, alice):
    names = [f"Place {n}" for n in range(MAX_ENTITIES + 1)]
    body = {"content": "Has been to many places.", "type": "semantic"}
    by_api = api_error(
        alice_api.post("/v1/memories", {**body, "mode": "remember", "entities": names}),
        "entities",
    )
    on_page = page_error(
        page.post(reverse("memory-add"), {**body, "entities": ", ".join(names)}), "entities"
    )
    assert by_api == on_page == f"At most {MAX_ENTITIES} entities are accepted; these are 51."
    assert not Memory.objects.exists()


def test_a_reason_over_the_limit_is_refused_by_both_in_one_sentence(alice_api, page, alice):
    memory = Memory.propose(alice, "Likes tea.", Memory.Type.PREFERENCE)
    reason = "r" * (MAX_REASON_CHARS + 1)
    by_api = api_error(
        alice_api.post(f"/v1/memories/{memory.pk}", {"action": "confirm", "reason": reason}),
        "reason",
    )
    on_page = page_error(
        page.post(
            reverse("memory-edit", args=[memory.pk]),
            {"content": "Likes green tea.", "type": "preference", "entities": "", "reason": reason},
        ),
        "reason",
    )
    assert by_api == on_page == f"At most {MAX_REASON_CHARS} characters are accepted; this is 1001."
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED


def test_content_without_a_word_is_refused_by_both_in_one_sentence(alice_api, page, alice):
    body = {"content": "?!", "type": "semantic"}
    by_api = api_error(alice_api.post("/v1/memories", {**body, "mode": "remember"}), "content")
    on_page = page_error(page.post(reverse("memory-add"), {**body, "entities": ""}), "content")
    assert by_api == on_page
    assert by_api.startswith("Content must say something")
    assert not Memory.objects.exists()


def test_a_list_search_over_the_limit_is_refused_by_both_in_one_sentence(alice_api, page):
    text = "t" * 501
    by_api = api_error(alice_api.get("/v1/memories", params={"q": text}), "q")
    response = page.get(reverse("memory-list"), {"q": text})
    assert response.context["invalid"]
    assert by_api == page_error(response, "q")


def test_an_about_over_its_limit_is_refused_by_both_in_one_sentence(alice_api, page, alice):
    memory = Memory.remember(alice, "Tom lives in Leeds.", Memory.Type.SEMANTIC)
    subject = "brother " + "T" * MAX_SUBJECT_CHARS
    about = {"subject": subject, "kind": "person", "aspect": "home", "occasion": ""}
    by_api = api_error(
        alice_api.post(f"/v1/memories/{memory.pk}", {"action": "supersede", "about": about}),
        "about",
    )
    on_page = page_error(
        page.post(
            reverse("memory-edit", args=[memory.pk]),
            {
                "content": "Tom lives in Leeds.",
                "type": "semantic",
                "entities": "",
                "about_subject": subject,
                "about_kind": "person",
                "about_aspect": "home",
                "about_occasion": "",
            },
        ),
        "about_subject",
    )
    assert by_api == on_page
    assert by_api.startswith("about.subject is")
    assert Memory.objects.count() == 1
