"""`connect mcp` / `connect chat`: an assistant that remembers, after `make run`.

Both use one API token of the owner's (``TIMOTHY_OWNER_USERNAME``, the account
`make run` creates), named "assistant (make mcp / make chat)": made on first use
and kept in ``TIMOTHY_DATA_DIR/assistant_token`` (readable by its owner only),
reused while it is live; revoke it on the Tokens page and the next run makes
another. Its scopes are all three: the tools remember and confirm.

- ``connect mcp`` prints the MCP configuration (stdio: the absolute path of
  this virtualenv's ``timothy-mcp`` and its environment; and the HTTP
  variant) to paste into Claude Desktop or any MCP client.
- ``connect chat`` runs examples/chat.py against the running service with that
  token, the chat model given by ``OPENAI_BASE_URL`` (``OPENAI_MODEL``,
  ``OPENAI_API_KEY``), and says first whether the service takes extraction.

`make mcp` and `make chat` install the client (``./client[mcp]``) and run these.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memories.api_tokens import ApiToken
from memories.management.base import SchemaCommand
from timothy.env import read_secret_key

TOKEN_FILE = "assistant_token"
TOKEN_NAME = "assistant (make mcp / make chat)"
MCP_PORT = 8002
EXAMPLE = Path(settings.BASE_DIR) / "examples" / "chat.py"


def loopback_url(address: str) -> str:
    """The URL a local client uses for a listening address (0.0.0.0 -> 127.0.0.1)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def assistant_token(username: str) -> tuple[str, bool]:
    """The kept token if it is still live and the owner's, else a new one; (token, made)."""
    path = Path(settings.DATA_DIR) / TOKEN_FILE
    kept = read_secret_key(path)
    if kept:
        token = ApiToken.authenticate(kept)
        if token is not None and token.owner.get_username() == username:
            return kept, False
    User = get_user_model()
    owner = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
    if owner is None:
        raise CommandError(
            f"There is no account {username!r} yet: run `make run` first (it creates it)."
        )
    _, raw = ApiToken.issue(owner, TOKEN_NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(raw + "\n")
    return raw, True


def mcp_command() -> str:
    """This virtualenv's timothy-mcp, as an absolute path (symlinks kept: it is a venv)."""
    return str(Path(sys.executable).absolute().parent / "timothy-mcp")


def mcp_configurations(url: str, token: str) -> tuple[dict, dict]:
    stdio = {
        "mcpServers": {
            "timothy-memory": {
                "command": mcp_command(),
                "args": [],
                "env": {"TIMOTHY_URL": url, "TIMOTHY_TOKEN": token},
            }
        }
    }
    http = {
        "mcpServers": {
            "timothy-memory": {
                "type": "http",
                "url": f"http://127.0.0.1:{MCP_PORT}/mcp",
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }
    return stdio, http


class Command(SchemaCommand):
    help = "Connect an assistant: print the MCP configuration (mcp) or start the chat (chat)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("what", choices=("mcp", "chat"))

    def handle(self, *args, what: str, **options) -> None:
        if what == "chat":
            self.check_chat_model()
        url = loopback_url(settings.PUBLIC_ADDR)
        try:
            requests.get(url + "/login/", timeout=10)
        except requests.RequestException:
            raise CommandError(
                f"Nothing answers at {url}: start `make run` in another terminal first."
            ) from None
        token, made = assistant_token(settings.OWNER_USERNAME)
        note = "made a new" if made else "reusing the"
        self.stderr.write(
            f"Connected as {settings.OWNER_USERNAME!r} at {url} ({note} token "
            f"{token[: ApiToken.PREFIX_LENGTH]}…, kept in {Path(settings.DATA_DIR) / TOKEN_FILE}; "
            "revoke it on the Tokens page)."
        )
        if what == "mcp":
            self.print_mcp(url, token)
        else:
            self.run_chat(url, token)

    def print_mcp(self, url: str, token: str) -> None:
        stdio, http = mcp_configurations(url, token)
        self.stdout.write(
            "\nMCP over stdio (Claude Desktop: Settings > Developer > Edit Config, into "
            "claude_desktop_config.json; any MCP client: its server list):\n"
        )
        self.stdout.write(json.dumps(stdio, indent=2))
        self.stdout.write(
            "\nOr over HTTP: run this in a terminal and keep it running,\n\n"
            f"  TIMOTHY_URL={url} TIMOTHY_TOKEN={token} \\\n"
            f"    {mcp_command()} --transport http --port {MCP_PORT}\n\n"
            "and give the MCP client:\n"
        )
        self.stdout.write(json.dumps(http, indent=2))
        self.stdout.write(
            "\nRestart the assistant, then ask it to remember something; `recall` brings "
            "it back in any later conversation.\n"
        )

    def check_chat_model(self) -> None:
        if not os.environ.get("OPENAI_BASE_URL"):
            raise CommandError(
                "make chat needs a chat model: set OPENAI_BASE_URL to an OpenAI-compatible "
                "API (e.g. http://127.0.0.1:11434/v1 for Ollama, https://api.openai.com/v1), "
                "OPENAI_MODEL, and OPENAI_API_KEY if it asks for one."
            )

    def run_chat(self, url: str, token: str) -> None:
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("DJANGO_", "TIMOTHY_SERVICE_TOKEN", "TIMOTHY_OWNER"))
        }
        env.update(
            TIMOTHY_URL=url,
            TIMOTHY_TOKEN=token,
            TIMOTHY_INTERNAL_URL=loopback_url(settings.INTERNAL_ADDR),
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, str(EXAMPLE)], env)
