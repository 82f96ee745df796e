"""What a memory is about, over the API: in every memory's JSON, given on create and
supersede, checked, and deciding what a create's ``related`` offers."""

from __future__ import annotations

import pytest

from memories.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_create_answers_what_the_memory_is_about(alice_api):
    body = alice_api.create("My brother Tom moved to Porto in May.")
    assert body["about"] == {
        "subject": "brother Tom",
        "kind": "person",
        "aspect": "home",
        "occasion": "",
        "set_by": "rules",
    }


def test_a_caller_may_give_the_about(alice_api):
    body = alice_api.create(
        "Moved in with Tom.",
        about={"subject": "brother Tom", "kind": "person", "aspect": "home"},
    )
    assert body["about"]["set_by"] == "owner"
    assert body["about"]["subject"] == "brother Tom"
    assert Memory.objects.get(pk=body["id"]).about_subject == "brother Tom"


@pytest.mark.parametrize(
    ("about", "message"),
    [
        ({"kind": "robot"}, "about.kind must be one of: self, person, pet, organisation, thing."),
        ({"kind": "person"}, "about.subject must name whom or what"),
        ({"colour": "red"}, "about has no field 'colour'."),
        ("home", "about must be an object"),
        ({"kind": "person", "subject": "x" * 121}, "about.subject is 121 characters; at most 120."),
    ],
)
def test_a_bad_about_is_refused_with_a_sentence(alice_api, about, message):
    response = alice_api.post(
        "/v1/memories",
        {"content": "Lives in Porto.", "type": "semantic", "mode": "remember", "about": about},
    )
    assert response.status_code == 400
    assert message in response.json()["error"]["details"]["about"][0]


def test_a_supersede_may_correct_only_the_about(alice_api):
    first = alice_api.create("Moved in with Tom.")
    response = alice_api.post(
        f"/v1/memories/{first['id']}",
        {"action": "supersede", "about": {"subject": "Tom", "kind": "person", "aspect": "home"}},
    )
    assert response.status_code == 201, response.text
    new = response.json()
    assert new["content"] == "Moved in with Tom."
    assert new["about"]["subject"] == "Tom" and new["about"]["set_by"] == "owner"
    chain = alice_api.get(f"/v1/memories/{new['id']}/chain").json()
    assert [version["about"]["set_by"] for version in chain["memories"]] == ["rules", "owner"]


def test_a_create_offers_another_persons_fact_only_as_see_also(alice_api):
    mine = alice_api.create("Lives in Lisbon.")
    brother = alice_api.create("My brother lives in Porto.")
    body = alice_api.create("Lives in Porto now.", mode="propose")
    relations = {item["id"]: item["relation"] for item in body["related"]}
    assert relations[mine["id"]] == "update"
    assert relations.get(brother["id"]) in (None, "see_also")
