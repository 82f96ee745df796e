"""`timothy-mcp` with a read-only token: recall works, remember answers the service's
403 sentence, against a real running service."""

from __future__ import annotations

import subprocess
import sys

from tests.client.service import ROOT
from tests.mcp.helpers import error_text, run_async, stdio_client_for, structured
from tests.mcp.test_stdio import params


def read_only_token(timothy, username: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", "createtoken", username, "--scopes", "read"],
        cwd=ROOT,
        env=timothy.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_a_read_only_token_recalls_but_may_not_remember(timothy, owner, tmp_path):
    username, _ = owner
    token = read_only_token(timothy, username)
    outcome: dict = {}

    async def session() -> None:
        async with stdio_client_for(params(timothy, token), tmp_path / "mcp.log") as client:
            outcome["recall"] = structured(
                await client.call_tool("recall", {"query": "Where do I keep my bike?"})
            )
            outcome["remember"] = error_text(
                await client.call_tool(
                    "remember", {"content": "Keeps the bike in the hall.", "type": "semantic"}
                )
            )

    run_async(session)

    assert "block" in outcome["recall"]
    assert outcome["remember"] == (
        "This token may not remember or act on memories: that needs the write scope, and it "
        "has read. Create a token with the write scope on the Tokens page."
    )
