"""The `remember` tool definitions in tools/: a model's tool call, its arguments
posted unchanged to POST /v1/memories, becomes an active memory."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings

from memories.models import Memory
from memories.serializers import MAX_ENTITIES, MAX_ENTITY_CHARS, MemoryCreateSerializer

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def openai_parameters() -> dict:
    tool = json.loads((TOOLS / "remember.openai.json").read_text())
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "remember"
    return tool["function"]["parameters"]


def anthropic_parameters() -> dict:
    tool = json.loads((TOOLS / "remember.anthropic.json").read_text())
    assert tool["name"] == "remember"
    return tool["input_schema"]


# What models send back: OpenAI as a JSON string in tool_calls[].function.arguments,
# Anthropic as the `input` object of a tool_use block.
OPENAI_CALL = {
    "id": "call_abc123",
    "type": "function",
    "function": {
        "name": "remember",
        "arguments": '{"content": "Prefers an aisle seat on long-haul flights.", '
        '"type": "preference", "entities": ["long-haul flights"], "mode": "remember"}',
    },
}
ANTHROPIC_CALL = {
    "type": "tool_use",
    "id": "toolu_01",
    "name": "remember",
    "input": {
        "content": "Ran the Berlin marathon in September 2024.",
        "type": "episodic",
        "entities": ["Berlin marathon"],
        "mode": "remember",
    },
}
MINIMAL_CALL = {"content": "Is allergic to peanuts.", "type": "semantic", "mode": "remember"}


def test_it_ships_one_schema_in_both_styles():
    assert openai_parameters() == anthropic_parameters()
    jsonschema.Draft202012Validator.check_schema(openai_parameters())


def test_it_agrees_with_the_create_route():
    parameters = openai_parameters()
    fields = MemoryCreateSerializer().fields
    assert set(parameters["properties"]) <= set(fields)
    required_by_api = {name for name, field in fields.items() if field.required}
    assert required_by_api <= set(parameters["required"])
    assert parameters["properties"]["type"]["enum"] == Memory.Type.values
    assert parameters["properties"]["mode"]["enum"] == [MemoryCreateSerializer.Mode.REMEMBER]
    assert parameters["properties"]["content"]["maxLength"] == settings.MAX_CONTENT_CHARS
    entities = parameters["properties"]["entities"]
    assert entities["maxItems"] == MAX_ENTITIES
    assert entities["items"]["maxLength"] == MAX_ENTITY_CHARS


@pytest.mark.parametrize(
    "arguments",
    [
        json.loads(OPENAI_CALL["function"]["arguments"]),
        ANTHROPIC_CALL["input"],
        MINIMAL_CALL,
    ],
    ids=["openai", "anthropic", "minimal"],
)
def test_it_posts_a_tool_calls_arguments_unchanged(alice_api, alice, arguments):
    jsonschema.validate(arguments, openai_parameters())
    response = alice_api.post("/v1/memories", arguments)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["content"] == arguments["content"]
    assert body["type"] == arguments["type"]
    assert body["entities"] == arguments.get("entities", [])
    assert (body["status"], body["source"], body["confidence"]) == ("active", "remember", 1.0)
    assert Memory.objects.get(pk=body["id"]).owner == alice


def test_it_refuses_arguments_the_tool_schema_refuses(alice_api):
    # What a model might invent beyond the schema is refused by the API too.
    arguments = {**MINIMAL_CALL, "importance": "high"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, openai_parameters())
    assert alice_api.post("/v1/memories", arguments).status_code == 400
