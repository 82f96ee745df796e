"""Helpers for building test data."""

from __future__ import annotations

from datetime import datetime

from memories.models import Memory


def make_memory(
    owner,
    content: str = "Alice prefers aisle seats on long flights.",
    type: str = Memory.Type.SEMANTIC,
    *,
    status: str = Memory.Status.ACTIVE,
    entities: list[str] | None = None,
    confidence: float = 0.9,
    created_at: datetime | None = None,
    last_confirmed_at: datetime | None = None,
    embedding: list[float] | None = None,
    **extra,
) -> Memory:
    """Create a memory directly in the given state (no events), for test set-up."""
    fields = dict(
        owner=owner,
        content=content,
        type=type,
        status=status,
        entity_refs=entities or [],
        confidence=confidence,
        embedding=embedding,
        **extra,
    )
    if created_at is not None:
        fields["created_at"] = created_at
    if last_confirmed_at is not None:
        fields["last_confirmed_at"] = last_confirmed_at
    elif status == Memory.Status.ACTIVE:
        fields["last_confirmed_at"] = fields.get("created_at")
    return Memory.objects.create(**fields)
