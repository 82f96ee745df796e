"""Rules every record module of the store shares, kept in a module that imports
nothing of ours, so the modules that hold the store's other models (access_log,
api_tokens) can use them without importing memories.models, which imports them."""

from __future__ import annotations

# What a redacted memory says instead of its text (the database allows nothing else).
REDACTED_CONTENT = "[redacted]"


class MemoryIsPermanent(Exception):
    """Memories and their events are never deleted."""

    def __init__(self) -> None:
        super().__init__("Memories are never deleted: reject, archive or supersede them instead.")
