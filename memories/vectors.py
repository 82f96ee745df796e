"""Vectors as pgvector reads them, and as JSON carries them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def vector_text(vector: Sequence[float]) -> str:
    """The vector as pgvector's text input, e.g. "[0.25,-1e-05,...]".

    Rounded to float32 first, as the column stores it, then written with 9
    significant digits, which read back to exactly that float32: the same
    stored vector as the shortest form of each float64, several times faster
    to write (the vectors of 100,000 import lines).
    """
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + (",".join(("%.9g",) * len(values)) % tuple(values)) + "]"


def vector_list(vector) -> list[float] | None:
    """A stored vector as a JSON list: the shortest decimal of each float32,
    which reads back to the same number."""
    if vector is None:
        return None
    return [float(str(value)) for value in vector]


def graph_distance(stored: str, other: str, dimensions: int) -> str:
    """SQL for the cosine distance the HNSW graph orders by: ``stored`` (the
    memory's ``embedding`` column) and ``other`` (a column or a vector's text) at
    half precision, as ``memories.models.embedding_graph_index`` holds them.

    Only an ORDER BY that reads exactly like the index's expression walks the
    graph; the distances a search reports are the exact ones, ``stored <=>
    other`` on the float32 vectors.
    """
    half = f"halfvec({int(dimensions)})"
    return f"({stored})::{half} <=> ({other})::{half}"
