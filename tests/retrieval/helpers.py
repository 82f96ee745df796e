"""Vectors and memories for retrieval tests."""

from __future__ import annotations

import math

from django.conf import settings


def vector(*weights: tuple[int, float]) -> list[float]:
    """A unit vector with the given (dimension, weight) components."""
    values = [0.0] * settings.EMBEDDING_DIMENSIONS
    for dimension, weight in weights:
        values[dimension] += weight
    norm = math.sqrt(sum(value * value for value in values))
    return [value / norm for value in values]


def axis(dimension: int) -> list[float]:
    return vector((dimension, 1.0))
