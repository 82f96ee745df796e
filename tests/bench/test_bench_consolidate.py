"""The benchmark's synthetic data plants exactly the near-duplicates it claims to."""

from __future__ import annotations

import numpy as np
import pytest

from bench.management.commands.bench_consolidate import DUPLICATE_COSINE, Command
from memories.consolidation import NEAR_DUPLICATE_MIN_COSINE


@pytest.mark.parametrize("data", ["latent", "sharp"])
def test_it_plants_near_duplicates_and_nothing_else(data):
    vectors, groups = Command()._vectors(4000, 0.05, seed=3, data=data)
    assert vectors.shape == (4000, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert sum(len(group) - 1 for group in groups) == 200
    for original, *copies in groups:
        for copy in copies:
            cosine = float(vectors[original] @ vectors[copy])
            assert DUPLICATE_COSINE[0] - 1e-4 <= cosine <= DUPLICATE_COSINE[1] + 1e-4
    planted = {position for group in groups for position in group}
    group_of = {position: index for index, group in enumerate(groups) for position in group}
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    rows, cols = np.nonzero(similarity >= NEAR_DUPLICATE_MIN_COSINE)
    for a, b in zip(rows.tolist(), cols.tolist(), strict=True):
        assert a in planted and b in planted and group_of[a] == group_of[b]
