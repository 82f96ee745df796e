"""Where a memory came from, beyond its source and session: the API token that
created it, recorded in its metadata when the API creates it.

Memories created before tokens were recorded, and those created elsewhere
(extraction, import, these pages), have no token: the pages show what is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memories.api_tokens import ApiToken

# The key of Memory.metadata that names the API token a memory was created with.
API_TOKEN_KEY = "api_token"


def token_metadata(token) -> dict[str, Any]:
    """What a memory created through the API records of the token that created it."""
    if token is None or getattr(token, "pk", None) is None:
        return {}
    return {API_TOKEN_KEY: {"id": token.pk, "name": token.name, "prefix": token.prefix}}


def recorded_token(metadata: dict | None) -> dict[str, Any] | None:
    """The token a memory's metadata names ({"id", "name", "prefix"}), if any."""
    token = (metadata or {}).get(API_TOKEN_KEY)
    return token if isinstance(token, dict) and token.get("id") else None


# How a memory's first event reads: "<verb> <channel>", e.g. "Proposed through the API".
CREATION_VERBS = {
    "proposed": "Proposed",
    "created": "Added",
    "imported": "Imported",
    "version": "Written as a new version",
    "merged": "Merged",
}
CHANNEL_PHRASES = {
    "api": "through the API",
    "page": "on these pages",
    "extraction": "by extraction from a conversation",
    "consolidation": "by consolidation",
    "import": "from an export file",
    "command": "from the command line",
    "admin": "in the admin",
}


@dataclass
class Provenance:
    # "Proposed through the API"; '' when no event records it.
    how: str
    # The recorded token ({"id", "name", "prefix"}), and whether it is revoked now.
    token: dict[str, Any] | None
    token_revoked: bool
    # Came through the API before tokens were recorded.
    token_unknown: bool


def provenance(memory, creation_event, owner) -> Provenance:
    """Where ``memory`` came from, from its first event and its metadata."""
    how = ""
    via = ""
    if creation_event is not None:
        via = creation_event.via
        verb = CREATION_VERBS.get(creation_event.action, creation_event.get_action_display())
        how = f"{verb} {CHANNEL_PHRASES.get(via, f'via {via}')}"
    token = recorded_token(memory.metadata)
    revoked = False
    if token is not None:
        row = ApiToken.objects.filter(owner=owner, pk=token["id"]).first()
        revoked = row is None or row.is_revoked
    return Provenance(
        how=how,
        token=token,
        token_revoked=revoked,
        token_unknown=token is None and via == "api",
    )
