"""Fusion reads the candidates' vectors in PostgreSQL's binary form: the very
float32 values stored, the owner's only."""

from __future__ import annotations

import random

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from memories.models import Memory
from retrieval.fusion import cosine
from retrieval.vectors import stored_vectors

pytestmark = pytest.mark.django_db


def random_vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(384)]


def test_it_reads_the_stored_values_exactly_and_only_the_owners():
    rng = random.Random(3)
    User = get_user_model()
    owner, other = User.objects.create_user("ana"), User.objects.create_user("ben")
    mine = [
        Memory.objects.create(
            owner=owner, type="semantic", content=f"m{i}", embedding=random_vector(rng)
        )
        for i in range(3)
    ]
    unembedded = Memory.objects.create(owner=owner, type="semantic", content="no vector yet")
    theirs = Memory.objects.create(
        owner=other, type="semantic", content="t", embedding=random_vector(rng)
    )

    found = stored_vectors(owner.pk, [m.pk for m in mine] + [unembedded.pk, theirs.pk])

    assert set(found) == {m.pk for m in mine}
    with connection.cursor() as cursor:
        for memory in mine:
            cursor.execute("SELECT embedding::text FROM memories_memory WHERE id = %s", [memory.pk])
            as_text = np.array(cursor.fetchone()[0][1:-1].split(","), dtype=np.float32)
            assert found[memory.pk].dtype == np.float64
            assert np.array_equal(found[memory.pk], as_text.astype(np.float64))
    assert stored_vectors(owner.pk, []) == {}


def test_cosine_matches_the_textbook_formula():
    rng = random.Random(5)
    a, b = random_vector(rng), random_vector(rng)
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5
    assert cosine(a, b) == pytest.approx(dot / norms, rel=1e-12)
    assert cosine(a, [0.0] * 384) == 0.0
    assert cosine(None, b) is None
