"""The ``timothy-mcp`` command: the MCP server, or one sentence when the MCP SDK is missing.

The client installs without the ``mcp`` extra (``pip install timothy-client``),
and the command is installed either way; without the SDK it says what to
install and exits with status 2 instead of a traceback.
"""

from __future__ import annotations

import sys

MISSING_SDK = "timothy-mcp needs the MCP SDK: pip install 'timothy-client[mcp]'"
# What only the mcp extra brings; a missing module of our own is a real bug.
OWN_MODULES = frozenset({"timothy_client", "requests"})


def main(argv: list[str] | None = None) -> int:
    try:
        from timothy_client import mcp_server
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] in OWN_MODULES:
            raise
        print(MISSING_SDK, file=sys.stderr)
        return 2
    return mcp_server.main(argv)


if __name__ == "__main__":
    sys.exit(main())
