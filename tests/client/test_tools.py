"""The `remember` tool: shipped by the client (one copy; tools/ must match it),
validated as the schema says, posted once per tool call."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import jsonschema
import pytest
import requests

from tests.client.faults import refused_url
from timothy_client import Memory, anthropic_tools, openai_tools
from timothy_client.errors import InvalidToolCall
from timothy_client.tools import remember_schema, validate

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_COPY = ROOT / "client" / "timothy_client" / "tool_definitions"


@pytest.mark.parametrize("name", ["remember.openai.json", "remember.anthropic.json"])
def test_it_keeps_the_tools_folder_identical_to_the_package(name):
    assert (ROOT / "tools" / name).read_bytes() == (PACKAGE_COPY / name).read_bytes(), (
        f"tools/{name} differs from the client's copy: edit "
        f"client/timothy_client/tool_definitions/{name} and copy it to tools/"
    )


def test_it_gives_both_formats_with_one_schema():
    [openai] = openai_tools()
    [anthropic] = anthropic_tools()
    assert openai["function"]["name"] == anthropic["name"] == "remember"
    assert openai["function"]["parameters"] == anthropic["input_schema"] == remember_schema()
    # Callers may change what they get without changing what the next caller gets.
    openai["function"]["name"] = "changed"
    assert openai_tools()[0]["function"]["name"] == "remember"


def test_it_saves_an_openai_tool_call(memory):
    content = f"Is allergic to peanuts ({uuid.uuid4().hex[:8]})."
    arguments = json.dumps({"content": content, "type": "semantic", "mode": "remember"})
    result = memory.handle_tool_call("remember", arguments, call_id="call_" + uuid.uuid4().hex)
    assert result.ok and result.error is None
    assert (result.memory.content, result.memory.status) == (content, "active")
    assert json.loads(result.content) == {
        "saved": True,
        "id": result.memory.id,
        "type": "semantic",
        "content": content,
    }


def test_it_saves_an_anthropic_tool_call_and_fills_in_the_mode(memory):
    content = f"Ran the Berlin marathon in 2024 ({uuid.uuid4().hex[:8]})."
    arguments = {"content": content, "type": "episodic", "entities": ["Berlin marathon"]}
    result = memory.handle_tool_call("remember", arguments, call_id="toolu_" + uuid.uuid4().hex)
    assert result.ok
    assert result.memory.entities == ["Berlin marathon"]
    assert "mode" not in arguments  # the caller's object is left alone


def test_it_saves_a_repeated_tool_call_once(memory):
    content = f"Speaks Portuguese ({uuid.uuid4().hex[:8]})."
    arguments = {"content": content, "type": "semantic", "mode": "remember"}
    call_id = "call_" + uuid.uuid4().hex
    first = memory.handle_tool_call("remember", arguments, call_id=call_id)
    again = memory.handle_tool_call("remember", arguments, call_id=call_id)
    assert first.memory.id == again.memory.id
    assert [r.id for r in memory.list(q=content) if r.content == content] == [first.memory.id]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"content": "   ", "type": "semantic"}, "content must not be blank"),
        ({"content": "x", "type": "gossip"}, "type must be one of"),
        (
            {"content": "x", "type": "semantic", "importance": "high"},
            "remember takes no argument 'importance'; its arguments are content, type, "
            "entities, mode.",
        ),
        ({"content": "x", "type": "semantic", "replaces": 12}, "no argument 'replaces'"),
        ({"type": "semantic"}, "content is required"),
        (
            {"content": "x", "type": "semantic", "entities": "Berlin"},
            "entities must be of type array",
        ),
    ],
)
def test_it_explains_a_bad_call_to_the_model_without_posting(arguments, message):
    # Nothing listens there: a post would say "could not be reached".
    result = Memory(refused_url(), "tm_token").handle_tool_call("remember", arguments)
    assert not result.ok and result.memory is None
    assert message in result.error
    assert json.loads(result.content) == {"saved": False, "error": result.error}


def test_it_explains_an_unknown_tool():
    result = Memory(refused_url(), "tm_token").handle_tool_call("forget_everything", {})
    assert not result.ok
    assert "Unknown tool 'forget_everything'" in result.error


def test_it_explains_a_refusal_by_the_service(timothy):
    stranger = Memory(timothy.public_url, "tm_" + "q" * 43)
    result = stranger.handle_tool_call("remember", {"content": "x", "type": "semantic"})
    assert not result.ok
    assert "refused" in result.error


def test_it_explains_an_unreachable_service():
    client = Memory(refused_url(), "tm_token", retries=0)
    result = client.handle_tool_call("remember", {"content": "x", "type": "semantic"})
    assert not result.ok
    assert "could not be reached" in result.error


VALID = {"content": "Likes kites.", "type": "preference", "mode": "remember"}
CASES = [
    VALID,
    {**VALID, "entities": ["kites"]},
    {**VALID, "content": ""},
    {**VALID, "content": "\t "},
    {**VALID, "content": "x" * 4001},
    {**VALID, "type": "gossip"},
    {**VALID, "entities": "kites"},
    {**VALID, "entities": ["x" * 201]},
    {**VALID, "entities": [f"e{n}" for n in range(51)]},
    {**VALID, "entities": [""]},
    {**VALID, "content": 42},
    {**VALID, "confidence": 0.5},
    {key: value for key, value in VALID.items() if key != "type"},
]


@pytest.mark.parametrize("arguments", CASES)
def test_it_validates_as_the_schema_and_the_service_do(timothy, arguments):
    try:
        validate(arguments, remember_schema())
        accepted = True
    except InvalidToolCall:
        accepted = False
    try:
        jsonschema.validate(arguments, remember_schema())
        schema_accepts = True
    except jsonschema.ValidationError:
        schema_accepts = False
    assert accepted == schema_accepts
    answer = requests.post(
        timothy.public_url + "/v1/memories",
        json=arguments,
        headers={"Authorization": f"Bearer {timothy.token}"},
        timeout=30,
    )
    # What the tool accepts, the service stores.
    if accepted:
        assert answer.status_code == 201, answer.text
    else:
        assert answer.status_code == 400, answer.text
