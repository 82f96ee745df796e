"""Where the memory block goes: after the stable system prefix, never inside it."""

from __future__ import annotations


def compose_system(stable_prefix: str, block: str) -> str:
    """The system prompt of one turn: ``prefix + "\\n\\n" + block``, or the prefix alone.

    The prefix is returned byte for byte, so that provider prompt caches keep
    hitting on it while the block changes from turn to turn.
    """
    if not block:
        return stable_prefix
    return stable_prefix + "\n\n" + block
