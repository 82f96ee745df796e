"""Related memories in the API: every create answer lists them, remember keeps one copy,
confirm takes replaces, and a rejected memory can be restored."""

from __future__ import annotations

from memories.models import Memory, MemoryEvent
from tests.base import make_memory


def test_it_lists_what_a_proposal_updates(alice_api, alice):
    aisle = make_memory(alice, "Prefers an aisle seat on long flights.")
    make_memory(alice, "Is allergic to peanuts.")

    body = alice_api.create("Prefers a window seat on long flights.", "preference", "propose")

    assert body["status"] == "proposed"
    assert body["related"] == [
        {
            "id": aisle.pk,
            "relation": "update",
            "score": 0.667,
            "content": aisle.content,
            "status": "active",
        }
    ]
    # Nothing was decided for the owner: both are still there.
    aisle.refresh_from_db()
    assert aisle.status == Memory.Status.ACTIVE


def test_it_says_when_the_same_fact_already_waits_in_the_queue(alice_api, alice):
    first = alice_api.create("Has a dog named Biscuit.", "semantic", "propose")
    again = alice_api.create("Has a dog named Biscuit.", "semantic", "propose")
    assert [(r["id"], r["relation"], r["status"]) for r in again["related"]] == [
        (first["id"], "duplicate", "proposed")
    ]


def test_it_answers_an_empty_list_when_nothing_is_related(alice_api, alice, bob):
    make_memory(bob, "Prefers a window seat on long flights.")
    body = alice_api.create("Prefers a window seat on long flights.", "preference", "remember")
    assert body["related"] == []
    assert body["status"] == "active"


def test_it_remembers_a_duplicate_as_a_new_version_of_it(alice_api, alice):
    leila = make_memory(alice, "His wife's name is Leila.", entities=["Leila"])

    body = alice_api.create(
        "His wife's name is Leila", "semantic", "remember", entities=["Leila"], session_id="s-9"
    )

    leila.refresh_from_db()
    assert body["related"] == [
        {
            "id": leila.pk,
            "relation": "duplicate",
            "score": 1.0,
            "content": leila.content,
            "status": "active",
        }
    ]
    assert leila.status == Memory.Status.SUPERSEDED and leila.superseded_by_id == body["id"]
    assert (body["status"], body["confidence"], body["source"]) == ("active", 1.0, "remember")
    assert body["session_id"] == "s-9"
    assert Memory.objects.for_owner(alice).active().count() == 1
    event = MemoryEvent.objects.get(memory_id=body["id"])
    assert event.action == "version"
    assert event.reason == f"remembered again (duplicate of memory {leila.pk})"


def test_it_replays_the_related_list_with_the_same_idempotency_key(alice_api, alice):
    aisle = make_memory(alice, "Prefers an aisle seat on long flights.")
    request = {
        "content": "Prefers a window seat on long flights.",
        "type": "preference",
        "mode": "propose",
    }
    headers = {"Idempotency-Key": "related-1"}
    first = alice_api.post("/v1/memories", request, headers=headers)
    aisle_gone = Memory.objects.filter(pk=aisle.pk)
    aisle_gone.update(status=Memory.Status.ARCHIVED)
    again = alice_api.post("/v1/memories", request, headers=headers)

    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert first.json()["related"][0]["id"] == aisle.pk
    assert Memory.objects.for_owner(alice).filter(status="proposed").count() == 1


def test_it_confirms_a_proposal_as_the_new_version_of_an_active_memory(alice_api, alice):
    aisle = make_memory(alice, "Prefers an aisle seat.")
    window = Memory.propose(alice, "Prefers a window seat.", Memory.Type.PREFERENCE)

    response = alice_api.post(
        f"/v1/memories/{window.pk}",
        {"action": "confirm", "replaces": aisle.pk, "reason": "changed her mind"},
    )

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "active"
    chain = alice_api.get(f"/v1/memories/{aisle.pk}/chain").json()
    assert chain["head_id"] == window.pk
    assert [m["id"] for m in chain["memories"]] == [aisle.pk, window.pk]
    assert chain["memories"][0]["status"] == "superseded"


def test_it_answers_409_when_the_replaced_memory_is_no_longer_the_head(alice_api, alice):
    aisle = make_memory(alice, "Prefers an aisle seat.")
    head = aisle.supersede("Prefers an aisle seat near the front.")
    window = Memory.propose(alice, "Prefers a window seat.", Memory.Type.PREFERENCE)

    response = alice_api.post(
        f"/v1/memories/{window.pk}", {"action": "confirm", "replaces": aisle.pk}
    )

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "illegal_transition"
    assert error["details"] == {
        "id": aisle.pk,
        "action": "replace",
        "status": "superseded",
        "head_id": head.pk,
    }
    window.refresh_from_db()
    assert window.status == Memory.Status.PROPOSED


def test_it_answers_404_for_another_owners_replaced_memory(alice_api, alice, bob):
    bobs = make_memory(bob, "Prefers an aisle seat.")
    window = Memory.propose(alice, "Prefers a window seat.", Memory.Type.PREFERENCE)

    response = alice_api.post(
        f"/v1/memories/{window.pk}", {"action": "confirm", "replaces": bobs.pk}
    )

    assert response.status_code == 404
    assert response.json()["error"]["message"] == f"No memory {bobs.pk}."
    bobs.refresh_from_db()
    assert bobs.status == Memory.Status.ACTIVE


def test_it_takes_replaces_only_with_confirm(alice_api, alice):
    aisle = make_memory(alice, "Prefers an aisle seat.")
    window = Memory.propose(alice, "Prefers a window seat.", Memory.Type.PREFERENCE)
    for body in (
        {"action": "reject", "replaces": aisle.pk},
        {"action": "confirm", "replaces": "42"},
        {"action": "confirm", "replaces": 0},
    ):
        response = alice_api.post(f"/v1/memories/{window.pk}", body)
        assert response.status_code == 400, body
        assert "replaces" in response.json()["error"]["details"]


def test_it_restores_a_rejected_memory_to_the_queue(alice_api, alice):
    memory = Memory.propose(alice, "Has a cat named Miso.", Memory.Type.SEMANTIC)
    memory.reject(actor=alice)

    response = alice_api.post(f"/v1/memories/{memory.pk}", {"action": "restore", "reason": "oops"})

    assert response.status_code == 200
    assert response.json()["status"] == "proposed"
    chain = alice_api.get(f"/v1/memories/{memory.pk}/chain").json()
    [only] = chain["memories"]
    assert [e["action"] for e in only["events"]] == ["proposed", "rejected", "restored"]
    assert only["events"][-1]["reason"] == "oops"
    again = alice_api.post(f"/v1/memories/{memory.pk}", {"action": "restore"})
    assert again.status_code == 409
    assert again.json()["error"]["details"]["status"] == "proposed"


def test_confirming_a_proposal_with_its_copies_rejects_them_in_the_same_decision(
    alice_api, alice, bob
):
    first = alice_api.create("Has a dog named Biscuit.", "semantic", "propose")
    again = alice_api.create("Has a dog named Biscuit", "semantic", "propose")
    bobs = Memory.propose(bob, "Has a dog named Biscuit.", Memory.Type.SEMANTIC)
    copy_ids = [r["id"] for r in again["related"] if r["status"] == "proposed"]
    assert copy_ids == [first["id"]]

    answer = alice_api.post(
        f"/v1/memories/{again['id']}", {"action": "confirm", "copies": [*copy_ids, bobs.pk]}
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "active"
    # Another owner's proposal is passed over, as if it did not exist.
    assert answer.json()["settled_copies"] == [first["id"]]
    copy = Memory.objects.get(pk=first["id"])
    assert copy.status == Memory.Status.REJECTED
    assert copy.events.last().reason.startswith(f"Duplicate of memory {again['id']}")
    bobs.refresh_from_db()
    assert bobs.status == Memory.Status.PROPOSED


def test_rejecting_a_proposal_rejects_its_copies_and_skips_settled_ones(alice_api, alice):
    first = Memory.propose(alice, "Is allergic to peanuts.", Memory.Type.SEMANTIC)
    second = Memory.propose(alice, "Is allergic to peanuts", Memory.Type.SEMANTIC)
    settled = Memory.propose(alice, "Allergic to peanuts.", Memory.Type.SEMANTIC)
    settled.confirm(actor=alice)

    answer = alice_api.post(
        f"/v1/memories/{first.pk}", {"action": "reject", "copies": [second.pk, settled.pk]}
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["settled_copies"] == [second.pk]
    second.refresh_from_db()
    settled.refresh_from_db()
    assert (second.status, settled.status) == (Memory.Status.REJECTED, Memory.Status.ACTIVE)


def test_only_a_confirm_or_a_reject_takes_copies(alice_api, alice):
    memory = make_memory(alice, "Plays the cello.")
    copy = Memory.propose(alice, "Plays the cello", Memory.Type.SEMANTIC)

    answer = alice_api.post(f"/v1/memories/{memory.pk}", {"action": "archive", "copies": [copy.pk]})

    assert answer.status_code == 400
    assert "copies" in answer.text
    copy.refresh_from_db()
    assert copy.status == Memory.Status.PROPOSED
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
