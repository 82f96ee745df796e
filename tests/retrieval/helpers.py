"""Vectors and memories for retrieval tests."""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from tests.base import make_memory


def vector(*weights: tuple[int, float]) -> list[float]:
    """A unit vector with the given (dimension, weight) components."""
    values = [0.0] * settings.EMBEDDING_DIMENSIONS
    for dimension, weight in weights:
        values[dimension] += weight
    norm = math.sqrt(sum(value * value for value in values))
    return [value / norm for value in values]


def axis(dimension: int) -> list[float]:
    return vector((dimension, 1.0))


ABOUT_MANAGER = {
    "about_subject": "self",
    "about_kind": "self",
    "about_aspect": "manager",
    "about_set_by": "owner",
}


def manager_history(owner, *, later_days_ago: float = 30):
    """The owner's old manager (a memory along axis 0) and, written later, the
    new one: half alike the old memory and sharing none of a question's words
    ("Who is my manager now?"), so no leg finds it; three unrelated fillers."""
    now = timezone.now()
    older = make_memory(
        owner,
        "Her manager at Fernwood is Hannah Ostrowski, the Head of Design.",
        created_at=now - timedelta(days=700),
        embedding=axis(0),
        **ABOUT_MANAGER,
    )
    later = make_memory(
        owner,
        "At Loomwork she reports to Tobi Mensah, the VP of Design.",
        created_at=now - timedelta(days=later_days_ago),
        embedding=vector((0, 0.5), (7, 0.866)),
        **ABOUT_MANAGER,
    )
    for index in range(3):
        make_memory(
            owner,
            f"Waters the garden on day {index} of the week.",
            created_at=now - timedelta(days=300),
            embedding=axis(20 + index),
        )
    return older, later
