"""POST /internal/v1/extract with an owner's API token: the propose scope, that owner only."""

from __future__ import annotations

import pytest

from memories.models import ApiToken, Memory
from tests.extraction.test_extract_route import BODY, SERVICE_TOKEN, post
from tests.fakes.openai_server import CHAT, chat_answer

pytestmark = pytest.mark.urls("timothy.internal_urls")

FACT = {
    "type": "preference",
    "content": "The owner is vegetarian.",
    "entities": [],
    "confidence": 0.9,
    "turn": 1,
}


@pytest.fixture
def extract_url(live_server, settings):
    settings.SERVICE_TOKEN = SERVICE_TOKEN
    return live_server.url + "/internal/v1/extract"


def test_a_propose_token_extracts_for_its_owner(extract_url, fake_llm, alice):
    _, raw = ApiToken.issue(alice, "assistant", scopes=["propose"])
    fake_llm.queue(CHAT, chat_answer({"facts": [FACT]}))

    response = post(extract_url, BODY, token=raw)

    assert response.status_code == 202, response.text
    memory = Memory.objects.get(owner=alice)
    assert memory.status == Memory.Status.PROPOSED
    assert memory.content == "The owner is vegetarian."


def test_without_an_owner_the_tokens_owner_is_meant(extract_url, fake_llm, alice):
    _, raw = ApiToken.issue(alice, "assistant", scopes=["propose"])
    fake_llm.queue(CHAT, chat_answer({"facts": [FACT]}))
    body = {key: value for key, value in BODY.items() if key != "owner"}

    assert post(extract_url, body, token=raw).status_code == 202
    assert Memory.objects.get().owner == alice


@pytest.mark.parametrize("other", ["bob", "mallory"])
def test_it_refuses_another_owner_known_or_not(extract_url, fake_llm, alice, bob, other):
    _, raw = ApiToken.issue(alice, "assistant", scopes=["propose"])

    response = post(extract_url, {**BODY, "owner": other}, token=raw)

    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "other_owner"
    assert "for its owner 'alice' only" in error["message"]
    assert fake_llm.requests == []
    assert Memory.objects.count() == 0


def test_it_needs_the_propose_scope(extract_url, fake_llm, alice):
    _, raw = ApiToken.issue(alice, "reader", scopes=["read", "write"])

    response = post(extract_url, BODY, token=raw)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "missing_scope"
    assert "needs the propose scope" in response.json()["error"]["message"]
    assert fake_llm.requests == []


def test_it_works_with_no_service_token_configured(extract_url, settings, fake_llm, alice):
    settings.SERVICE_TOKEN = ""
    _, raw = ApiToken.issue(alice, "assistant", scopes=["propose"])
    fake_llm.queue(CHAT, chat_answer({"facts": [FACT]}))
    assert post(extract_url, BODY, token=raw).status_code == 202


def test_a_paused_or_unknown_owner_token_is_refused(extract_url, fake_llm, alice):
    token, raw = ApiToken.issue(alice, "assistant", scopes=["propose"])
    token.pause()
    response = post(extract_url, BODY, token=raw)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "token_paused"
    assert post(extract_url, BODY, token="tm_not-a-token").status_code == 401
    assert fake_llm.requests == []


def test_an_owner_token_may_not_retrieve_for_anyone(live_server, settings, alice):
    settings.SERVICE_TOKEN = SERVICE_TOKEN
    _, raw = ApiToken.issue(alice, "assistant")
    response = post(
        live_server.url + "/internal/v1/retrieve", {"owner": "alice", "query": "x"}, token=raw
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "service_token_required"
