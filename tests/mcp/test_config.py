"""The MCP client configuration printed in docs/client.md is exact: a test starts the
server from it, as a desktop client would, and calls a tool."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from mcp import StdioServerParameters

from tests.mcp.helpers import TIMOTHY_MCP, TOOLS, run_async, stdio_client_for, structured
from timothy_client import mcp_server

DOCS = Path(__file__).resolve().parents[2] / "docs" / "client.md"
COMMAND_PLACEHOLDER = "/path/to/timothy-memory/.venv/bin/timothy-mcp"


def documented_configurations() -> list[dict]:
    blocks = re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.S)
    return [json.loads(block) for block in blocks if "mcpServers" in block]


def test_it_starts_from_the_documented_stdio_configuration(timothy, owner, tmp_path):
    stdio, _ = documented_configurations()
    server = stdio["mcpServers"]["timothy-memory"]
    assert set(server) == {"command", "args", "env"}
    assert server["command"] == COMMAND_PLACEHOLDER
    assert server["env"] == {"TIMOTHY_URL": "http://127.0.0.1:8000", "TIMOTHY_TOKEN": "tm_…"}
    # Filled in as a user would: their clone's path, their service, their token.
    params = StdioServerParameters(
        command=server["command"].replace(COMMAND_PLACEHOLDER, TIMOTHY_MCP),
        args=server["args"],
        env={**server["env"], "TIMOTHY_URL": timothy.public_url, "TIMOTHY_TOKEN": owner[1]},
    )
    outcome: dict = {}

    async def session() -> None:
        async with stdio_client_for(params, tmp_path / "mcp.log") as client:
            outcome["tools"] = {tool.name for tool in (await client.list_tools()).tools}
            outcome["pending"] = structured(await client.call_tool("list_pending", {"limit": 1}))

    run_async(session)
    assert outcome["tools"] == TOOLS
    assert set(outcome["pending"]) == {"memories", "more"}


def test_it_documents_the_http_endpoint_the_server_serves():
    _, http = documented_configurations()
    server = http["mcpServers"]["timothy-memory"]
    assert server["type"] == "http"
    url = urlsplit(server["url"])
    assert (url.hostname, url.port, url.path) == (
        mcp_server.DEFAULT_HOST,
        mcp_server.DEFAULT_PORT,
        mcp_server.HTTP_PATH,
    )
