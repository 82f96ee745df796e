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


def test_a_name_or_relation_alone_is_read_as_whom_the_store_already_names(alice_api):
    alice_api.create("Her mother Akosua lives with her and the twins.")
    named = alice_api.create("Akosua was admitted to Korle Bu with malaria.")
    related = alice_api.create("My mother spent a few days at Korle Bu.", mode="propose")
    assert named["about"]["subject"] == "mother Akosua"
    assert related["about"]["subject"] == "mother Akosua"
    # Whom the store names by one relation only: two sons, and "my son" names neither.
    alice_api.create("Her son Kojo is fifteen.")
    alice_api.create("Her son Kwame is twelve.")
    assert alice_api.create("My son plays football.")["about"]["subject"] == "son"


def test_a_name_told_apart_from_a_relation_of_the_same_name_is_not_an_update(alice_api):
    son = alice_api.create("Mikko, her son, works for Supercell.")
    body = alice_api.create("Mikko from downstairs works for Nokia.", mode="propose")
    assert body["about"]["subject"] == "acquaintance Mikko"
    relations = {item["id"]: item["relation"] for item in body["related"]}
    assert relations.get(son["id"]) in (None, "see_also")


def test_a_name_the_owner_goes_by_in_their_memories_is_read_as_the_owner(alice_api):
    alice_api.create("Goes by Gerry.")
    grandad = alice_api.create(
        "Matthew and Jess's son Theo was born on 9 December 2025, making Gerry a grandad "
        "for the third time.",
        "episodic",
    )
    assert grandad["about"]["subject"] == "self"
    assert grandad["about"]["aspect"] == "grandchildren"
