"""A memory as JSON: the one builder behind the API's bodies, the search
results (``ScoredMemory.to_dict``) and the export lines (``memories/io.py``).

Each field is written one way; the API and the export only choose which
fields, in which order (an export line also carries what import needs to
restore a memory whole: its metadata and its vector).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from memories.models import Memory
from memories.vectors import vector_list


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


FIELDS: dict[str, Callable[[Memory], Any]] = {
    "id": lambda memory: memory.pk,
    "type": lambda memory: memory.type,
    "content": lambda memory: memory.content,
    "status": lambda memory: memory.status,
    "entities": lambda memory: list(memory.entity_refs),
    "confidence": lambda memory: memory.confidence,
    "source": lambda memory: memory.source,
    "session_id": lambda memory: memory.session_id,
    "created_at": lambda memory: iso(memory.created_at),
    "last_confirmed_at": lambda memory: iso(memory.last_confirmed_at),
    "last_retrieved_at": lambda memory: iso(memory.last_retrieved_at),
    "metadata": lambda memory: memory.metadata,
    "embedding": lambda memory: vector_list(memory.embedding),
    "superseded_by": lambda memory: memory.superseded_by_id,
    "about": lambda memory: None if memory.status == "redacted" else memory.about.to_dict(),
}

# What the API answers with (memories/serializers.py MemorySerializer documents it).
API_FIELDS = (
    "id",
    "type",
    "content",
    "status",
    "entities",
    "confidence",
    "source",
    "session_id",
    "created_at",
    "last_confirmed_at",
    "last_retrieved_at",
    "superseded_by",
    "about",
)
# One export line (docs/import-export.md); ``id``/``superseded_by`` let import rebuild chains.
EXPORT_FIELDS = (
    "id",
    "content",
    "type",
    "status",
    "entities",
    "confidence",
    "created_at",
    "last_confirmed_at",
    "last_retrieved_at",
    "source",
    "session_id",
    "metadata",
    "embedding",
    "superseded_by",
    "about",
)


def memory_to_dict(memory: Memory, fields: tuple[str, ...] = API_FIELDS) -> dict[str, Any]:
    return {name: FIELDS[name](memory) for name in fields}
