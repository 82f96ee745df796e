"""POST /internal/v1/extract over real HTTP, on the internal URLconf."""

from __future__ import annotations

import pytest
import requests

from memories.models import Memory
from tests.fakes.openai_server import CHAT, chat_answer

pytestmark = pytest.mark.urls("timothy.internal_urls")

SERVICE_TOKEN = "service-token-for-tests"

BODY = {
    "owner": "alice",
    "session_id": "session-42",
    "phase": "pre_compaction",
    "turns": [
        {"role": "system", "content": "You are Timothy."},
        {"role": "user", "content": "I'm vegetarian.", "at": "2026-11-29T10:00:00Z"},
        {"role": "assistant", "content": "Good to know!"},
    ],
}


@pytest.fixture
def extract_url(live_server, settings):
    settings.SERVICE_TOKEN = SERVICE_TOKEN
    return live_server.url + "/internal/v1/extract"


def post(url: str, body, token: str | None = SERVICE_TOKEN) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.post(url, json=body, headers=headers, timeout=30)


def test_it_accepts_and_proposes_in_the_background(extract_url, fake_llm, alice):
    fact = {
        "type": "preference",
        "content": "The owner is vegetarian.",
        "entities": [],
        "confidence": 0.9,
        "turn": 1,
    }
    fake_llm.queue(CHAT, chat_answer({"facts": [fact]}))
    response = post(extract_url, BODY)
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "queued"
    assert response.json()["task_id"]
    # Under test the django-q2 queue runs tasks inline, so the fact is there now.
    memory = Memory.objects.get(owner=alice)
    assert memory.content == "The owner is vegetarian."
    assert memory.status == Memory.Status.PROPOSED
    assert memory.session_id == "session-42"
    assert memory.metadata["phase"] == "pre_compaction"


def test_it_answers_503_without_an_llm(extract_url, settings, alice):
    settings.LLM_BASE_URL = ""
    response = post(extract_url, BODY)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "llm_not_configured"
    assert "TIMOTHY_LLM_BASE_URL" in response.json()["error"]["message"]
    assert Memory.objects.count() == 0


def test_it_accepts_even_when_the_llm_answers_garbage(extract_url, fake_llm, alice):
    fake_llm.queue(CHAT, chat_answer("{{{ definitely not json"))
    assert post(extract_url, BODY).status_code == 202
    assert Memory.objects.count() == 0


@pytest.mark.parametrize(
    "change, field",
    [
        ({"phase": "whenever"}, "phase"),
        ({"session_id": ""}, "session_id"),
        ({"owner": None}, "owner"),
        ({"turns": []}, "turns"),
        ({"turns": [{"role": "wizard", "content": "hi"}]}, "turns[0]"),
        ({"turns": [{"role": "user", "content": 42}]}, "turns[0]"),
        ({"turns": [{"role": "user", "content": "hi", "at": "yesterday"}]}, "turns[0]"),
    ],
)
def test_it_rejects_an_invalid_body(extract_url, fake_llm, alice, change, field):
    response = post(extract_url, {**BODY, **change})
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    assert fake_llm.requests == []


def test_it_rejects_a_body_that_is_not_an_object(extract_url, fake_llm, alice):
    response = post(extract_url, ["turns"])
    assert response.status_code == 400


def test_it_answers_404_for_an_unknown_owner(extract_url, fake_llm, alice):
    response = post(extract_url, {**BODY, "owner": "mallory"})
    assert response.status_code == 404
    assert fake_llm.requests == []


def test_it_needs_the_service_token(extract_url, fake_llm, alice):
    assert post(extract_url, BODY, token=None).status_code == 401
    assert post(extract_url, BODY, token="wrong").status_code in (401, 403)
    assert fake_llm.requests == []
