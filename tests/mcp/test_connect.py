"""`make mcp` (`manage.py connect mcp`) after `make run`: the configuration it prints
starts the MCP server as a desktop client would, and the assistant remembers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

from mcp import StdioServerParameters

from tests.client.service import ROOT
from tests.client.test_example_chat import ChatProcess
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import CHAT, chat_answer
from tests.mcp.helpers import TIMOTHY_MCP, run_async, stdio_client_for, structured
from timothy_client import mcp_server


def connect(timothy, what: str, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "manage.py", "connect", what],
        cwd=ROOT,
        env={**timothy.env, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return result


def printed_configurations(output: str) -> list[dict]:
    return [json.loads(block) for block in re.findall(r"^\{\n.*?^\}", output, re.M | re.S)]


def test_the_printed_configuration_gives_an_assistant_that_remembers(timothy, tmp_path):
    first = connect(timothy, "mcp")
    stdio, http = printed_configurations(first.stdout)
    server = stdio["mcpServers"]["timothy-memory"]
    assert server["command"] == TIMOTHY_MCP
    token = server["env"]["TIMOTHY_TOKEN"]
    assert server["env"] == {"TIMOTHY_URL": timothy.public_url, "TIMOTHY_TOKEN": token}
    assert "made a new token" in first.stderr
    # Run again: the same token, not one more each time.
    again = connect(timothy, "mcp")
    assert printed_configurations(again.stdout) == [stdio, http]
    assert "reusing the token" in again.stderr
    assert http["mcpServers"]["timothy-memory"] == {
        "type": "http",
        "url": f"http://{mcp_server.DEFAULT_HOST}:{mcp_server.DEFAULT_PORT}{mcp_server.HTTP_PATH}",
        "headers": {"Authorization": f"Bearer {token}"},
    }
    assert f"TIMOTHY_TOKEN={token}" in again.stdout

    # Pasted as it is, as a desktop client starts it.
    kite = "Kite-" + uuid.uuid4().hex[:6]
    params = StdioServerParameters(**server)
    outcome: dict = {}

    async def session() -> None:
        async with stdio_client_for(params, tmp_path / "mcp.log") as client:
            outcome["saved"] = structured(
                await client.call_tool(
                    "remember", {"content": f"Flies a red kite called {kite}.", "type": "semantic"}
                )
            )
            outcome["recalled"] = structured(await client.call_tool("recall", {"query": kite}))

    run_async(session)
    assert outcome["saved"]["content"] == f"Flies a red kite called {kite}."
    assert kite in outcome["recalled"]["block"]


def test_make_chat_says_when_the_service_has_no_llm(timothy, fake_openai):  # noqa: F811
    # This package's service runs without an LLM: the chat goes on, and says why
    # nothing is extracted.
    fake_openai.queue(CHAT, chat_answer("Hello!"))
    env = {
        **timothy.env,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_MODEL": "fake-chat-model",
        "TIMOTHY_CLIENT_TIMEOUT": "30",
    }
    chat = ChatProcess(env, [sys.executable, "manage.py", "connect", "chat"])
    assert chat.say("Hello there") == "assistant> Hello!"
    code, errors = chat.quit()
    assert code == 0, errors
    assert "extraction off (the service answered 503 llm_not_configured" in errors
    assert "TIMOTHY_LLM_BASE_URL" in errors
