"""The API applies the model's limits, at the edge and one past it, naming the field."""

from __future__ import annotations

import pytest

from memories.errors import api_exception_handler
from memories.models import (
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_REASON_CHARS,
    MAX_SEARCH_CHARS,
    InvalidMemory,
    Memory,
    TooLong,
)
from tests.base import make_memory


def create(api, **fields):
    body = {"content": "Likes tea.", "type": "semantic", "mode": "remember", **fields}
    return api.post("/v1/memories", body)


def test_it_accepts_the_most_and_longest_entities(alice_api):
    names = [f"{n:03d}" + "x" * (MAX_ENTITY_CHARS - 3) for n in range(MAX_ENTITIES)]
    response = create(alice_api, entities=names)
    assert response.status_code == 201, response.text
    assert response.json()["entities"] == names


@pytest.mark.parametrize(
    "entities",
    [[f"n{n}" for n in range(MAX_ENTITIES + 1)], ["x" * (MAX_ENTITY_CHARS + 1)]],
)
def test_it_refuses_entities_over_the_limits(alice_api, entities):
    response = create(alice_api, entities=entities)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"].startswith("entities")
    assert not Memory.objects.exists()


def test_it_keeps_a_reason_at_the_limit(alice_api, alice):
    memory = make_memory(alice, status=Memory.Status.PROPOSED)
    body = {"action": "confirm", "reason": "r" * MAX_REASON_CHARS}
    assert alice_api.post(f"/v1/memories/{memory.pk}", body).status_code == 200
    assert memory.events.get().reason == "r" * MAX_REASON_CHARS


def test_it_refuses_a_reason_over_the_limit(alice_api, alice):
    memory = make_memory(alice, status=Memory.Status.PROPOSED)
    body = {"action": "confirm", "reason": "r" * (MAX_REASON_CHARS + 1)}
    response = alice_api.post(f"/v1/memories/{memory.pk}", body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("reason")
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED


def test_it_searches_the_list_up_to_the_limit(alice_api, alice):
    make_memory(alice, "Likes tea.")
    at_limit = alice_api.get("/v1/memories", params={"q": "tea" + " " * (MAX_SEARCH_CHARS - 3)})
    assert at_limit.status_code == 200
    over = alice_api.get("/v1/memories", params={"q": "t" * (MAX_SEARCH_CHARS + 1)})
    assert over.status_code == 400
    assert over.json()["error"]["message"].startswith("q")


def test_it_refuses_an_entity_filter_over_the_limit(alice_api):
    response = alice_api.get("/v1/memories", params={"entity": "e" * (MAX_ENTITY_CHARS + 1)})
    assert response.status_code == 400


@pytest.mark.parametrize(
    "error", [TooLong("reason", 1001, 1000), InvalidMemory("entities", "Too many.")]
)
def test_it_answers_a_broken_model_rule_400_naming_the_field(error):
    response = api_exception_handler(error, {})
    assert response.status_code == 400
    body = response.data["error"]
    assert body["code"] == "invalid_request"
    assert body["message"] == f"{error.field}: {error.message}"
    assert body["details"] == {error.field: [error.message]}
