"""Settling an update through `timothy-mcp`, over stdio and over streamable HTTP: what a
new memory repeats comes back in words, confirm takes replaces, supersede and archive
exist, an unknown argument is refused, and errors read as the service's sentence."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp import StdioServerParameters

from tests.mcp.helpers import (
    TIMOTHY_MCP,
    TOOLS,
    error_text,
    http_server,
    run_async,
    server_env,
    stdio_client_for,
    structured,
)
from tests.mcp.test_http import authorized_client

AISLE = "Prefers an aisle seat on long flights."
WINDOW = "Prefers a window seat on long flights."
NO_WORD = "Content must say something: at least one word (two letters or digits in a row)."


def run_session(transport: str, timothy, token: str, tmp_path, session: Callable) -> None:
    """Run ``session(client)`` against `timothy-mcp` started for ``transport``."""
    env = {"TIMOTHY_URL": timothy.public_url, "TIMOTHY_TOKEN": token}
    if transport == "stdio":
        params = StdioServerParameters(command=TIMOTHY_MCP, env=env)

        async def over_stdio() -> None:
            async with stdio_client_for(params, tmp_path / "mcp.log") as client:
                await session(client)

        run_async(over_stdio)
        return
    with http_server(server_env(**env), tmp_path / "mcp-http.log") as url:

        async def over_http() -> None:
            async with authorized_client(url, token) as client:
                await session(client)

        run_async(over_http)


@pytest.fixture(params=["stdio", "http"])
def mcp_session(request, timothy, tmp_path) -> Callable[[Callable[[Any], Awaitable[None]]], None]:
    """Runs a session against a fresh owner's `timothy-mcp` on one transport."""
    _, token = timothy.new_owner()
    return lambda session: run_session(request.param, timothy, token, tmp_path, session)


def test_it_settles_an_update(mcp_session):
    out: dict[str, Any] = {}

    async def session(client) -> None:
        call = client.call_tool
        out["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
        out["aisle"] = structured(await call("remember", {"content": AISLE, "type": "preference"}))
        out["again"] = await call("propose", {"content": AISLE.lower(), "type": "preference"})
        out["window"] = structured(await call("propose", {"content": WINDOW, "type": "preference"}))
        aisle, window = out["aisle"]["id"], out["window"]["id"]
        out["confirmed"] = structured(
            await call("confirm", {"memory_id": window, "replaces": aisle, "reason": "moved"})
        )
        out["history"] = structured(await call("memory_history", {"memory_id": aisle}))
        out["late"] = await call(
            "confirm", {"memory_id": out["again"].structured_content["id"], "replaces": aisle}
        )
        out["superseded"] = structured(
            await call("supersede", {"memory_id": window, "content": "Prefers the front row."})
        )
        out["archived"] = structured(
            await call("archive", {"memory_id": out["superseded"]["id"], "reason": "flies less"})
        )
        out["pending"] = structured(await call("list_pending", {}))

    mcp_session(session)

    assert set(out["tools"]) == TOOLS
    confirm_schema = out["tools"]["confirm"].input_schema
    assert set(confirm_schema["properties"]) == {"memory_id", "replaces", "reason"}
    assert confirm_schema["additionalProperties"] is False

    aisle, window = out["aisle"]["id"], out["window"]["id"]
    assert (out["aisle"]["related"], out["aisle"]["notes"]) == ([], [])
    again = out["again"]
    assert not again.is_error
    [related] = again.structured_content["related"]
    assert (related["id"], related["relation"], related["content"]) == (aisle, "duplicate", AISLE)
    note = (
        f'This repeats #{aisle}: "{AISLE}" — nothing new to confirm: reject '
        f"#{again.structured_content['id']}, or confirm it with replaces={aisle} to keep the "
        "new wording."
    )
    assert again.structured_content["notes"] == [note]
    # The model reads the text: the note is in it.
    assert note in json.loads(again.content[0].text)["notes"]

    assert (out["confirmed"]["id"], out["confirmed"]["status"]) == (window, "active")
    assert out["history"]["head_id"] == window
    assert [v["id"] for v in out["history"]["versions"]] == [aisle, window]
    assert error_text(out["late"]) == (
        f"Cannot replace memory {aisle}: it is superseded; the head of its chain is memory "
        f"{window} (only an active memory is replaced)."
    )
    new_head = out["superseded"]
    assert (new_head["content"], new_head["status"]) == ("Prefers the front row.", "active")
    assert new_head["id"] != window
    assert out["archived"]["status"] == "archived"
    # The late confirm changed nothing: the proposal still waits.
    assert [m["id"] for m in out["pending"]["memories"]] == [again.structured_content["id"]]


def test_it_refuses_what_it_does_not_know_in_plain_words(mcp_session):
    out: dict[str, Any] = {}

    async def session(client) -> None:
        call = client.call_tool
        proposal = structured(await call("propose", {"content": WINDOW, "type": "preference"}))
        out["proposal"] = proposal
        out["typo"] = await call("confirm", {"memory_id": proposal["id"], "replace": 1})
        out["extra"] = await call(
            "remember", {"content": AISLE, "type": "preference", "importance": "high"}
        )
        out["wordless"] = await call("remember", {"content": "x", "type": "semantic"})
        out["gossip"] = await call("remember", {"content": AISLE, "type": "gossip"})
        out["no_id"] = await call("archive", {"reason": "why not"})
        out["too_big"] = await call("recall", {"query": "seat", "token_budget": 10**7})
        out["pending"] = structured(await call("list_pending", {}))
        out["all"] = structured(await call("recall", {"query": "seat on long flights"}))

    mcp_session(session)

    assert error_text(out["typo"]) == (
        "confirm takes no argument 'replace'; its arguments are memory_id, replaces, reason."
    )
    assert error_text(out["extra"]) == (
        "remember takes no argument 'importance'; its arguments are content, type, entities."
    )
    assert error_text(out["wordless"]) == f"content: {NO_WORD}"
    assert error_text(out["gossip"]) == (
        "Invalid arguments for remember: type: Input should be 'semantic', 'preference', "
        "'episodic' or 'reflection'."
    )
    assert error_text(out["no_id"]) == "Invalid arguments for archive: memory_id is required."
    too_big = error_text(out["too_big"])
    assert too_big.startswith("token_budget: Ensure this value is less than or equal to")
    for text in (error_text(out[name]) for name in ("typo", "wordless", "gossip", "too_big")):
        assert "Error executing tool" not in text
        assert "unavailable" not in text
        assert "pydantic" not in text and "http" not in text
    # Nothing was confirmed nor written by the refused calls.
    assert [m["id"] for m in out["pending"]["memories"]] == [out["proposal"]["id"]]
    assert out["all"]["memories"] == []
