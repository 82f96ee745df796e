"""`timothy-mcp --transport http`: streamable HTTP on a loopback port, driven by the
MCP SDK's own client, against a real running service."""

from __future__ import annotations

import subprocess
import uuid

import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp.helpers import (
    TIMOTHY_MCP,
    TOOLS,
    http_server,
    run_async,
    server_env,
    structured,
)


def test_it_serves_the_tools_over_streamable_http(timothy, owner, tmp_path):
    _, token = owner
    marker = uuid.uuid4().hex[:6]
    env = server_env(TIMOTHY_URL=timothy.public_url, TIMOTHY_TOKEN=token)
    outcome: dict = {}

    async def session(url: str) -> None:
        async with authorized_client(url, token) as client:
            outcome["tools"] = {tool.name for tool in (await client.list_tools()).tools}
            outcome["remembered"] = structured(
                await client.call_tool(
                    "remember", {"content": f"Sails a dinghy named {marker}.", "type": "semantic"}
                )
            )
            outcome["recall"] = structured(
                await client.call_tool("recall", {"query": f"What is the dinghy {marker} called?"})
            )

    with http_server(env, tmp_path / "mcp-http.log") as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        run_async(session, url)

    assert outcome["tools"] == TOOLS
    assert outcome["remembered"]["status"] == "active"
    assert f"Sails a dinghy named {marker}." in outcome["recall"]["block"]
    assert [m["id"] for m in outcome["recall"]["memories"]] == [outcome["remembered"]["id"]]


def authorized_client(url: str, token: str) -> Client:
    """The SDK's client, sending the owner's token on every request."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def test_it_answers_401_without_the_owners_token(timothy, owner, tmp_path):
    _, token = owner
    env = server_env(TIMOTHY_URL=timothy.public_url, TIMOTHY_TOKEN=token)
    with http_server(env, tmp_path / "mcp-http.log") as url:
        for authorization in (None, "Bearer tm_wrong", f"Basic {token}", f"Bearer {token}x"):
            headers = dict(MCP_HEADERS)
            if authorization:
                headers["Authorization"] = authorization
            response = requests.post(url, json=INITIALIZE, headers=headers, timeout=30)
            assert response.status_code == 401, authorization
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            assert "Authorization: Bearer <token>" in response.json()["error"]["message"]

        answered = requests.post(
            url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answered.status_code == 200, answered.text

        async def unauthorized_session() -> None:
            async with Client(url, read_timeout_seconds=30) as client:
                await client.list_tools()

        with pytest.raises(BaseException):  # noqa: B017  (the SDK's error type varies)
            run_async(unauthorized_session)


def test_it_listens_only_on_loopback():
    env = server_env(TIMOTHY_TOKEN="tm_token")
    result = subprocess.run(
        [TIMOTHY_MCP, "--transport", "http", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "only loopback addresses" in result.stderr


def test_it_says_which_variable_is_missing():
    result = subprocess.run(
        [TIMOTHY_MCP], env=server_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "set TIMOTHY_TOKEN" in result.stderr
