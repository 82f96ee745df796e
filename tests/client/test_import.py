"""The client is a package of its own: it imports, with its MCP server and chat loop,
in a Python where Django is neither configured nor imported."""

from __future__ import annotations

import os
import subprocess
import sys

CHECK = """
import sys
import timothy_client, timothy_client.chat, timothy_client.mcp_server
assert "timothy" not in sys.modules and "memories" not in sys.modules, sorted(sys.modules)
loaded = sorted(name for name in sys.modules if name == "django" or name.startswith("django."))
print("django modules:", loaded)
print("from:", timothy_client.__file__)
"""


def test_it_imports_without_django(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTHON"))}
    # Outside the repository, so that only the installed package can be found.
    result = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "django modules: []" in result.stdout
    assert "timothy_client" in result.stdout
