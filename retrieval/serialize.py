"""Plain-JSON shapes of memories, shared by the API, the commands and the pages."""

from __future__ import annotations

from typing import Any

from memories.models import Memory


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def memory_to_dict(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.pk,
        "type": memory.type,
        "content": memory.content,
        "status": memory.status,
        "entities": list(memory.entity_refs),
        "confidence": memory.confidence,
        "source": memory.source,
        "session_id": memory.session_id,
        "created_at": _iso(memory.created_at),
        "last_confirmed_at": _iso(memory.last_confirmed_at),
        "last_retrieved_at": _iso(memory.last_retrieved_at),
        "superseded_by": memory.superseded_by_id,
    }


def scored_memory_to_dict(item) -> dict[str, Any]:
    data = memory_to_dict(item.memory)
    data["score"] = item.score
    data["score_parts"] = item.parts
    data["tokens"] = item.tokens
    data["position"] = item.position
    if item.cut_reason:
        data["cut_reason"] = item.cut_reason
    if item.shortened is not None:
        data["shown_content"] = item.shortened
    return data
