import pytest

from memories.models import ApiToken, Memory, MemoryEvent


def test_it_remembers_an_active_fact_at_full_confidence(alice_api, alice):
    response = alice_api.post(
        "/v1/memories",
        {
            "content": "  Alice is allergic to peanuts.  ",
            "type": "semantic",
            "entities": ["Alice", "peanuts", "alice"],
            "session_id": "chat-1",
            "mode": "remember",
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "active"
    assert body["confidence"] == 1.0
    assert body["source"] == "remember"
    assert body["content"] == "Alice is allergic to peanuts."
    assert body["entities"] == ["Alice", "peanuts"]
    assert body["session_id"] == "chat-1"
    assert body["last_confirmed_at"] is not None
    assert body["superseded_by"] is None
    memory = Memory.objects.get(pk=body["id"])
    assert memory.owner == alice
    assert memory.status == Memory.Status.ACTIVE
    event = MemoryEvent.objects.get(memory=memory)
    assert (event.action, event.actor, event.via) == ("created", alice, "api")


def test_it_proposes_a_staged_memory(alice_api):
    body = alice_api.create(
        "Alice is training for a marathon.", "episodic", mode="propose", confidence=0.7
    )
    assert body["status"] == "proposed"
    assert body["confidence"] == 0.7
    assert body["source"] == "api"
    assert body["last_confirmed_at"] is None
    assert Memory.objects.get(pk=body["id"]).status == Memory.Status.PROPOSED


def test_it_records_the_token_that_created_the_memory(make_api, alice):
    token, raw = ApiToken.issue(alice, "laptop assistant")
    api = make_api(raw)
    proposed = api.create("Alice is training for a marathon.", mode="propose")
    remembered = api.create("Alice is allergic to peanuts.", mode="remember")
    for body in (proposed, remembered):
        metadata = Memory.objects.get(pk=body["id"]).metadata
        assert metadata["api_token"] == {
            "id": token.pk,
            "name": "laptop assistant",
            "prefix": token.prefix,
        }
        assert "metadata" not in body


def test_it_answers_every_field_of_a_memory(alice_api):
    body = alice_api.create("Alice likes tea.", "preference")
    assert set(body) == {
        "id",
        "type",
        "content",
        "status",
        "entities",
        "confidence",
        "source",
        "session_id",
        "created_at",
        "last_confirmed_at",
        "last_retrieved_at",
        "superseded_by",
        "about",
        "related",
    }
    assert body["related"] == []
    # The account is alice: a memory about Alice is about its owner.
    assert body["about"] == {
        "subject": "self",
        "kind": "self",
        "aspect": "drink",
        "occasion": "",
        "set_by": "rules",
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "semantic", "mode": "remember"}, "content"),
        ({"content": "", "type": "semantic", "mode": "remember"}, "content"),
        ({"content": "   ", "type": "semantic", "mode": "remember"}, "content"),
        ({"content": 42, "type": "semantic", "mode": "remember"}, "content"),
        ({"content": "a\u0000b", "type": "semantic", "mode": "remember"}, "content"),
        ({"content": "xy", "type": "gossip", "mode": "remember"}, "type"),
        ({"content": "xy", "type": "semantic", "mode": "shout"}, "mode"),
        ({"content": "xy", "type": "semantic"}, "mode"),
        ({"content": "xy", "type": "semantic", "mode": "remember", "colour": "red"}, "colour"),
        ({"content": "xy", "type": "semantic", "mode": "remember", "entities": "Bob"}, "entities"),
        ({"content": "xy", "type": "semantic", "mode": "remember", "entities": [1]}, "entities"),
        ({"content": "xy", "type": "semantic", "mode": "propose", "confidence": 1.5}, "confidence"),
        (
            {"content": "xy", "type": "semantic", "mode": "propose", "confidence": "0.5"},
            "confidence",
        ),
        (
            {"content": "xy", "type": "semantic", "mode": "remember", "confidence": 0.5},
            "confidence",
        ),
        ({"content": "xy", "type": "semantic", "mode": "remember", "session_id": 7}, "session_id"),
    ],
)
def test_it_rejects_a_bad_body_naming_the_field(alice_api, body, field):
    response = alice_api.post("/v1/memories", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["details"]
    assert error["message"].startswith(field)
    assert not Memory.objects.exists()


def test_it_rejects_content_over_the_limit(alice_api, settings):
    settings.MAX_CONTENT_CHARS = 20
    response = alice_api.post(
        "/v1/memories", {"content": "x" * 21, "type": "semantic", "mode": "remember"}
    )
    assert response.status_code == 400
    assert "20 characters" in response.json()["error"]["message"]
    assert alice_api.create("x" * 20)["content"] == "x" * 20


@pytest.mark.parametrize("payload", ["[1, 2]", "null", '"text"', "{"])
def test_it_rejects_a_body_that_is_not_a_json_object(alice_api, payload):
    response = alice_api.post(
        "/v1/memories", data=payload, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"invalid_request", "malformed_json"}


def test_it_calls_broken_json_malformed(alice_api):
    response = alice_api.post(
        "/v1/memories", data='{"content": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


def test_it_rejects_nan_in_json(alice_api):
    response = alice_api.post(
        "/v1/memories",
        data='{"content": "x", "type": "semantic", "mode": "propose", "confidence": NaN}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


def test_it_rejects_a_lone_surrogate(alice_api):
    response = alice_api.post(
        "/v1/memories",
        data='{"content": "bad \\ud800 text", "type": "semantic", "mode": "remember"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert "content" in response.json()["error"]["details"]


def test_it_answers_415_for_a_body_that_is_not_json(alice_api):
    response = alice_api.post(
        "/v1/memories", data="content=x", headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_it_rejects_json_nested_too_deeply(alice_api):
    depth = 100_000
    response = alice_api.post(
        "/v1/memories",
        data="[" * depth + "]" * depth,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


def test_it_answers_with_the_entities_it_found_when_none_were_given(alice_api):
    assert alice_api.create("My sister Ana lives in Lisbon.")["entities"] == ["Ana", "Lisbon"]
    given = alice_api.create("My sister Ana lives in Lisbon.", entities=["Ana Silva"])
    assert given["entities"] == ["Ana Silva"]
