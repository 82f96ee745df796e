"""`timothy-mcp` over stdio, driven by the MCP SDK's own client as a desktop assistant
would, against a real running service."""

from __future__ import annotations

import uuid

from mcp import StdioServerParameters

from tests.mcp.helpers import (
    TIMOTHY_MCP,
    TOOLS,
    error_text,
    run_async,
    stdio_client_for,
    structured,
)


def params(timothy, token: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=TIMOTHY_MCP, env={"TIMOTHY_URL": timothy.public_url, "TIMOTHY_TOKEN": token}
    )


def test_it_serves_every_tool_over_stdio(timothy, owner, tmp_path):
    _, token = owner
    marker = uuid.uuid4().hex[:6]
    outcome: dict = {}

    async def session() -> None:
        async with stdio_client_for(params(timothy, token), tmp_path / "mcp.log") as client:
            listed = await client.list_tools()
            outcome["tools"] = {tool.name: tool for tool in listed.tools}

            outcome["remembered"] = structured(
                await client.call_tool(
                    "remember",
                    {
                        "content": f"Grows tomatoes on the balcony {marker}.",
                        "type": "semantic",
                        "entities": [f"balcony {marker}"],
                    },
                )
            )
            outcome["recall"] = await client.call_tool(
                "recall", {"query": f"What grows on the balcony {marker}?", "token_budget": 300}
            )
            outcome["proposed"] = structured(
                await client.call_tool(
                    "propose",
                    {"content": "Prefers green tea.", "type": "preference", "confidence": 0.6},
                )
            )
            outcome["doubtful"] = structured(
                await client.call_tool("propose", {"content": "Hates cats.", "type": "preference"})
            )
            outcome["pending"] = structured(await client.call_tool("list_pending", {}))
            outcome["confirmed"] = structured(
                await client.call_tool(
                    "confirm", {"memory_id": outcome["proposed"]["id"], "reason": "she agreed"}
                )
            )
            outcome["rejected"] = structured(
                await client.call_tool("reject", {"memory_id": outcome["doubtful"]["id"]})
            )
            outcome["pending_after"] = structured(
                await client.call_tool("list_pending", {"limit": 5})
            )
            outcome["history"] = structured(
                await client.call_tool("memory_history", {"memory_id": outcome["proposed"]["id"]})
            )

    run_async(session)

    assert set(outcome["tools"]) == TOOLS
    assert outcome["tools"]["recall"].annotations.read_only_hint is True
    assert outcome["tools"]["remember"].input_schema["required"] == ["content", "type"]

    remembered = outcome["remembered"]
    assert (remembered["status"], remembered["source"]) == ("active", "remember")

    recall = outcome["recall"]
    assert not recall.is_error
    block = recall.content[0].text
    assert block.startswith('<memory source="timothy-memory" trust="data">')
    assert f"- [semantic] Grows tomatoes on the balcony {marker}." in block
    assert recall.structured_content["block"] == block
    assert 0 < recall.structured_content["block_tokens"] <= 300
    assert remembered["id"] in [m["id"] for m in recall.structured_content["memories"]]
    assert str(remembered["id"]) in recall.content[1].text

    proposed, doubtful = outcome["proposed"], outcome["doubtful"]
    assert (proposed["status"], proposed["confidence"]) == ("proposed", 0.6)
    pending = outcome["pending"]
    assert [m["id"] for m in pending["memories"]] == [doubtful["id"], proposed["id"]]
    assert pending["more"] is False
    assert outcome["confirmed"]["status"] == "active"
    assert outcome["rejected"]["status"] == "rejected"
    assert outcome["pending_after"] == {"memories": [], "more": False}

    history = outcome["history"]
    assert history["head_id"] == proposed["id"]
    [version] = history["versions"]
    actions = [(event["action"], event["reason"]) for event in version["events"]]
    assert actions[0][0] == "proposed"
    assert ("confirmed", "she agreed") in actions


def test_it_answers_a_refused_action_with_a_tool_error(timothy, owner, tmp_path):
    _, token = owner
    results: dict = {}

    async def session() -> None:
        async with stdio_client_for(params(timothy, token), tmp_path / "mcp.log") as client:
            active = structured(
                await client.call_tool(
                    "remember", {"content": "Owns a red bike.", "type": "semantic"}
                )
            )
            results["twice"] = await client.call_tool("confirm", {"memory_id": active["id"]})
            results["missing"] = await client.call_tool("memory_history", {"memory_id": 10**12})
            results["blank"] = await client.call_tool(
                "remember", {"content": "", "type": "semantic"}
            )

    run_async(session)
    assert "Cannot confirm memory" in error_text(results["twice"])
    assert "it is active" in error_text(results["twice"])
    assert f"No memory {10**12}" in error_text(results["missing"])
    assert "content" in error_text(results["blank"])


def test_it_says_when_the_service_is_unreachable(timothy, owner, tmp_path):
    from tests.client.faults import refused_url

    results: dict = {}

    async def session() -> None:
        unreachable = StdioServerParameters(
            command=TIMOTHY_MCP, env={"TIMOTHY_URL": refused_url(), "TIMOTHY_TOKEN": owner[1]}
        )
        async with stdio_client_for(unreachable, tmp_path / "mcp.log") as client:
            results["recall"] = await client.call_tool("recall", {"query": "anything"})

    run_async(session)
    assert "Memory is unavailable right now" in error_text(results["recall"])
    assert "connection refused" in error_text(results["recall"])
