"""Installed without the ``mcp`` extra, ``timothy-mcp`` says what to install in one
sentence and exits 2: the installed command runs with the SDK's import made to fail."""

from __future__ import annotations

import subprocess
import sys

from tests.mcp.helpers import TIMOTHY_MCP
from timothy_client.mcp_command import MISSING_SDK

# As if the mcp package were not installed: any import of mcp or mcp.* fails.
WITHOUT_MCP = """
import runpy, sys
from importlib.abc import MetaPathFinder

class NoMCP(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMCP())
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_without_mcp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_MCP, TIMOTHY_MCP, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_names_the_extra_to_install_instead_of_a_traceback():
    result = run_without_mcp()
    assert result.returncode == 2
    assert result.stderr == MISSING_SDK + "\n"
    assert result.stdout == ""


def test_it_says_the_same_for_the_http_transport():
    result = run_without_mcp("--transport", "http")
    assert (result.returncode, result.stderr) == (2, MISSING_SDK + "\n")
