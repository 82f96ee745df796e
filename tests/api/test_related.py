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
