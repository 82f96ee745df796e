"""Text that is not text: a lone surrogate anywhere in a JSON body is a 400
``invalid_request`` on every route, never a 500 from an error message that
cannot be encoded."""

from __future__ import annotations

import json

import pytest

from memories.serializers import reject_lone_surrogates
from tests.api.test_internal_api import SERVICE_TOKEN

LONE = "\ud800"

CREATE = {"content": "Likes tea.", "type": "semantic", "mode": "remember"}
SEARCH = {"query": "tea"}

# (route, body): every enum of the API, an unknown field name, and a nested value.
PUBLIC_CASES = [
    ("/v1/memories", {**CREATE, "type": LONE}),
    ("/v1/memories", {**CREATE, "mode": LONE}),
    ("/v1/memories", {**CREATE, "mode": "propose", "type": "semantic" + LONE}),
    ("/v1/memories", {**CREATE, LONE: 1}),
    ("/v1/memories", {**CREATE, "entities": ["tea", LONE]}),
    ("/v1/memories/{id}", {"action": LONE}),
    ("/v1/memories/{id}", {"action": "supersede", "content": "x", "type": LONE}),
    ("/v1/memories/{id}", {"action": "confirm", "re" + LONE + "ason": "x"}),
    ("/v1/memories/search", {**SEARCH, "pipeline": LONE}),
    ("/v1/memories/search", {**SEARCH, "types": [LONE]}),
    ("/v1/memories/search", {**SEARCH, "types": ["semantic", "x" + LONE]}),
    ("/v1/memories/search", {**SEARCH, LONE: True}),
    ("/v1/memories/search", {**SEARCH, "query": "tea " + LONE}),
]

INTERNAL_CASES = [
    {"owner": "alice", **SEARCH, "pipeline": LONE},
    {"owner": "alice", **SEARCH, "types": [LONE]},
    {"owner": "alice", **SEARCH, LONE: 1},
    {"owner": LONE, **SEARCH},
]


def raw(body: dict) -> str:
    # json.dumps writes a lone surrogate as the escape "\ud800", as a client would.
    return json.dumps(body)


def assert_invalid_request(response) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "lone surrogate (\\ud800)" in error["message"]


@pytest.mark.parametrize(("path", "body"), PUBLIC_CASES)
def test_it_refuses_a_lone_surrogate_on_every_public_route(alice_api, path, body):
    memory = alice_api.create("Likes tea.")
    response = alice_api.post(
        path.format(id=memory["id"]),
        data=raw(body),
        headers={"Content-Type": "application/json"},
    )
    assert_invalid_request(response)


@pytest.mark.parametrize("body", INTERNAL_CASES)
def test_it_refuses_a_lone_surrogate_on_the_internal_route(settings, make_api, alice, body):
    settings.ROOT_URLCONF = "timothy.internal_urls"
    settings.SERVICE_TOKEN = SERVICE_TOKEN
    response = make_api(SERVICE_TOKEN).post(
        "/internal/v1/retrieve", data=raw(body), headers={"Content-Type": "application/json"}
    )
    assert_invalid_request(response)


def test_it_names_where_the_surrogate_was(alice_api):
    response = alice_api.post(
        "/v1/memories/search",
        data=raw({**SEARCH, "types": ["semantic", LONE]}),
        headers={"Content-Type": "application/json"},
    )
    assert response.json()["error"]["details"] == {
        "types[1]": ["Holds a lone surrogate (\\ud800), which is not text."]
    }


def test_it_names_a_field_name_by_its_escape(alice_api):
    response = alice_api.post(
        "/v1/memories",
        data=raw({**CREATE, "x" + LONE: 1}),
        headers={"Content-Type": "application/json"},
    )
    assert "x\\ud800" in response.json()["error"]["details"]


@pytest.mark.parametrize("low", ["\udc00", "\udfff"])
def test_it_refuses_low_surrogates_too(low):
    with pytest.raises(Exception, match="lone surrogate"):
        reject_lone_surrogates({"a": [{"b": "ok" + low}]})


def test_it_accepts_a_real_pair(alice_api):
    # "\ud83d\ude00" in JSON is one character (an emoji), not a lone surrogate.
    response = alice_api.post(
        "/v1/memories",
        data='{"content": "Smiles \\ud83d\\ude00", "type": "semantic", "mode": "remember"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["content"] == "Smiles \U0001f600"


# --- content that draws nothing -------------------------------------------------

INVISIBLE = ["\u200b\u2060\ufeff", " \u00a0\U000e0041\U000e0020\t", "\u202e\u2066"]


@pytest.mark.parametrize("content", INVISIBLE)
@pytest.mark.parametrize("mode", ["remember", "propose"])
def test_it_refuses_content_made_only_of_invisible_characters(alice_api, content, mode):
    response = alice_api.post("/v1/memories", {**CREATE, "content": content, "mode": mode})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("content: Content must have visible text")
    assert alice_api.get("/v1/memories?status=all").json()["memories"] == []


@pytest.mark.parametrize("content", INVISIBLE)
def test_it_refuses_an_invisible_new_version(alice_api, content):
    memory = alice_api.create("Likes tea.")
    response = alice_api.post(
        f"/v1/memories/{memory['id']}", {"action": "supersede", "content": content}
    )
    assert response.status_code == 400, response.text
    assert "content" in response.json()["error"]["details"]
    chain = alice_api.get(f"/v1/memories/{memory['id']}/chain").json()
    assert [m["status"] for m in chain["memories"]] == ["active"]


def test_it_keeps_visible_text_with_invisible_characters_around_it(alice_api):
    memory = alice_api.create("\u200bLikes tea.\u2060")
    assert memory["content"] == "\u200bLikes tea.\u2060"
