"""How the pages name types, sources and channels, in one place.

The pages call the types Fact, Preference, Event and Reflection; the block and
the API call them semantic, preference, episodic and reflection. Where the two
differ the pages show both: "Fact (semantic)".
"""

from __future__ import annotations

from memories.models import Memory, MemoryEvent

# The channel an event came through, as the pages say it ("via these pages").
VIA_LABELS = dict(MemoryEvent.Via.choices)

# Memory.Source, short enough for a table column.
SOURCE_SHORT_LABELS = {
    Memory.Source.REMEMBER: "Remember",
    Memory.Source.EXTRACTION: "Extraction",
    Memory.Source.API: "API",
    Memory.Source.CONSOLIDATION: "Consolidation",
    Memory.Source.IMPORT: "Import",
    Memory.Source.PAGE: "Page",
}


def type_name(memory_type: str) -> str:
    """'Fact (semantic)', 'Preference', 'Event (episodic)'; an unknown type as it is."""
    try:
        label = Memory.Type(memory_type).label
    except ValueError:
        return str(memory_type)
    return label if label.lower() == memory_type else f"{label} ({memory_type})"


def type_choices() -> list[tuple[str, str]]:
    return [(value, type_name(value)) for value in Memory.Type.values]
