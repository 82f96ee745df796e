"""POST /v1/memories/{id} {"action": "redact"}: over real HTTP."""

from __future__ import annotations

from memories.idempotency import key_digest
from memories.models import REDACTED_CONTENT, IdempotencyRecord, Memory, MemoryEvent
from tests.base import make_memory


def redact(api, memory_id: int, headers=None, **fields):
    return api.post(f"/v1/memories/{memory_id}", {"action": "redact", **fields}, headers=headers)


def chain_of_two(api):
    first = api.create("Bank PIN is 2468.", entities=["Bank"])
    second = api.post(
        f"/v1/memories/{first['id']}",
        {"action": "supersede", "content": "Bank PIN is 1357.", "reason": "new card"},
    ).json()
    return first, second


def test_it_redacts_one_version(alice_api, alice):
    first, second = chain_of_two(alice_api)

    response = redact(alice_api, first["id"], reason="a PIN, by mistake")

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["status"], body["content"], body["entities"]) == (
        first["id"],
        "redacted",
        REDACTED_CONTENT,
        [],
    )
    assert body["superseded_by"] == second["id"]
    assert Memory.objects.get(pk=second["id"]).content == "Bank PIN is 1357."


def test_the_chain_shows_who_redacted_when_and_why(alice_api, alice):
    first, second = chain_of_two(alice_api)
    redact(alice_api, first["id"], reason="a PIN, by mistake")

    chain = alice_api.get(f"/v1/memories/{second['id']}/chain").json()

    versions = {version["id"]: version for version in chain["memories"]}
    assert [version["id"] for version in chain["memories"]] == [first["id"], second["id"]]
    assert versions[first["id"]]["content"] == REDACTED_CONTENT
    redaction = versions[first["id"]]["events"][-1]
    assert (redaction["action"], redaction["actor"], redaction["via"], redaction["reason"]) == (
        "redacted",
        "alice",
        "api",
        "a PIN, by mistake",
    )
    assert redaction["data"] == {"from": "superseded", "chain": False}


def test_it_redacts_every_version_with_chain(alice_api, alice):
    first, second = chain_of_two(alice_api)

    response = redact(alice_api, first["id"], chain=True, reason="PINs")

    assert response.status_code == 200
    statuses = alice_api.get("/v1/memories", params={"status": "redacted"}).json()["memories"]
    assert sorted(m["id"] for m in statuses) == [first["id"], second["id"]]
    assert {m["content"] for m in statuses} == {REDACTED_CONTENT}
    assert alice_api.get("/v1/memories").json()["memories"] == []


def test_search_never_returns_a_redacted_memory(alice_api, alice):
    memory = alice_api.create("Allergic to penicillin.", entities=["penicillin"])
    query = {"query": "penicillin allergy"}
    assert [m["id"] for m in alice_api.post("/v1/memories/search", query).json()["memories"]] == [
        memory["id"]
    ]

    redact(alice_api, memory["id"], reason="health")

    found = alice_api.post("/v1/memories/search", query).json()
    assert found["memories"] == []
    assert "[redacted]" not in found["block"]


def test_it_refuses_another_owners_memory_and_a_missing_one_alike(alice_api, bob):
    bobs = make_memory(bob, "Bob's secret.")

    foreign = redact(alice_api, bobs.pk, reason="not mine")
    missing = redact(alice_api, bobs.pk + 1000, reason="nothing there")

    assert (foreign.status_code, missing.status_code) == (404, 404)
    assert foreign.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
    bobs.refresh_from_db()
    assert bobs.content == "Bob's secret."


def test_it_answers_409_when_already_redacted(alice_api):
    memory = alice_api.create("Old address.")
    assert redact(alice_api, memory["id"], reason="moved").status_code == 200

    again = redact(alice_api, memory["id"], reason="moved")

    assert again.status_code == 409
    error = again.json()["error"]
    assert error["code"] == "illegal_transition"
    assert error["details"] == {"id": memory["id"], "action": "redact", "status": "redacted"}


def test_a_redacted_memory_cannot_be_superseded_or_archived(alice_api):
    memory = alice_api.create("Old address.")
    redact(alice_api, memory["id"], reason="moved")

    for fields in ({"action": "supersede", "content": "New address."}, {"action": "archive"}):
        response = alice_api.post(f"/v1/memories/{memory['id']}", fields)
        assert response.status_code == 409
        assert response.json()["error"]["details"]["status"] == "redacted"


def test_it_needs_a_reason(alice_api):
    memory = alice_api.create("Old address.")

    for fields in ({}, {"reason": ""}, {"reason": "   "}):
        response = redact(alice_api, memory["id"], **fields)
        assert response.status_code == 400
        assert response.json()["error"]["details"] == {
            "reason": ["A redact needs a reason, for the record."]
        }
    assert Memory.objects.get(pk=memory["id"]).status == Memory.Status.ACTIVE


def test_it_refuses_a_reason_that_quotes_the_text(alice_api):
    memory = alice_api.create("Wifi password is tulip-42.", entities=["wifi"])

    quoting = redact(alice_api, memory["id"], reason="oops: Wifi password is tulip-42.")
    naming = redact(alice_api, memory["id"], reason="the WIFI one")

    assert (quoting.status_code, naming.status_code) == (400, 400)
    assert quoting.json()["error"]["code"] == naming.json()["error"]["code"] == "reason_quotes_text"
    assert not MemoryEvent.objects.filter(action=MemoryEvent.Action.REDACTED).exists()


def test_it_refuses_fields_that_belong_to_other_actions(alice_api):
    memory = alice_api.create("Old address.")

    with_content = redact(alice_api, memory["id"], reason="x", content="new text")
    chain_elsewhere = alice_api.post(
        f"/v1/memories/{memory['id']}", {"action": "archive", "chain": True}
    )
    not_a_boolean = redact(alice_api, memory["id"], reason="x", chain="true")

    assert [r.status_code for r in (with_content, chain_elsewhere, not_a_boolean)] == [400] * 3
    assert Memory.objects.get(pk=memory["id"]).status == Memory.Status.ACTIVE


def test_a_retried_create_after_redaction_replays_the_redacted_memory(alice_api, alice):
    body = {"content": "Door code 7788.", "type": "semantic", "mode": "remember"}
    headers = {"Idempotency-Key": "remember:Door-code-7788"}
    created = alice_api.post("/v1/memories", body, headers=headers).json()
    redact(alice_api, created["id"], reason="a code")

    retried = alice_api.post("/v1/memories", body, headers=headers)

    assert retried.status_code == 201
    assert retried.headers["Idempotent-Replayed"] == "true"
    assert (retried.json()["id"], retried.json()["status"], retried.json()["content"]) == (
        created["id"],
        "redacted",
        REDACTED_CONTENT,
    )
    assert Memory.objects.filter(owner=alice).count() == 1
    record = IdempotencyRecord.objects.get()
    assert record.key_digest == key_digest("remember:Door-code-7788")
    assert "7788" not in str(record.response_body) + record.request_hash


def test_a_redact_is_idempotent_with_a_key(alice_api):
    memory = alice_api.create("Old address.")
    headers = {"Idempotency-Key": "redact-old-address"}

    first = redact(alice_api, memory["id"], reason="moved", headers=headers)
    again = redact(alice_api, memory["id"], reason="moved", headers=headers)

    assert (first.status_code, again.status_code) == (200, 200)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert MemoryEvent.objects.filter(action=MemoryEvent.Action.REDACTED).count() == 1
