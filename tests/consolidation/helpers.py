"""Vectors with a chosen cosine, for planting near-duplicates."""

from __future__ import annotations

import math

DIMENSIONS = 384


def axis(i: int) -> list[float]:
    vector = [0.0] * DIMENSIONS
    vector[i] = 1.0
    return vector


def at_cosine(base: int, other: int, cosine: float) -> list[float]:
    """A unit vector with the given cosine to ``axis(base)``, leaning towards ``axis(other)``."""
    vector = [0.0] * DIMENSIONS
    vector[base] = cosine
    vector[other] = math.sqrt(1 - cosine * cosine)
    return vector
