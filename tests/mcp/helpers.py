"""Starting `timothy-mcp` the ways an MCP client does, and reading its tool results."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import requests
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.client.service import free_port, wait_for

# The console script `pip install ./client` puts next to the interpreter.
TIMOTHY_MCP = str(Path(sys.executable).parent / "timothy-mcp")
TOOLS = {
    "recall",
    "remember",
    "propose",
    "list_pending",
    "confirm",
    "reject",
    "supersede",
    "archive",
    "memory_history",
}


def server_env(**extra: str) -> dict[str, str]:
    """This process's environment without the service's settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMOTHY_", "DJANGO_"))}
    env.update(extra)
    return env


def run_async(function: Callable[..., Any], *args: Any) -> Any:
    """``anyio.run`` on a thread of its own.

    The browser tests keep Playwright's event loop running in the main thread
    for the rest of the session, and a thread runs one event loop at a time.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = anyio.run(function, *args)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=target, name="mcp-test-client")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def stdio_client_for(params: StdioServerParameters, log_path: Path) -> Client:
    """An SDK client that starts the server over stdio; the server's stderr goes to a file."""
    errlog = open(log_path, "a")  # noqa: SIM115  (closed when the test's tmp dir goes)
    return Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120)


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: Any) -> str:
    assert result.is_error, result
    return " ".join(block.text for block in result.content)


@contextmanager
def http_server(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """`timothy-mcp --transport http` on a free loopback port; yields the endpoint URL."""
    port = free_port()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [TIMOTHY_MCP, "--transport", "http", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/mcp"

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError("timothy-mcp exited:\n" + log_path.read_text())
        try:
            requests.get(url, timeout=5)
        except requests.ConnectionError:
            return False
        return True

    try:
        wait_for(listening, "timothy-mcp to listen", 120)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)
