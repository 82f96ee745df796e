"""Fusion loads its candidates in one binary statement: the very rows the ORM
would give, the very float32 values stored, the owner's alive memories only."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval.candidates import DEFERRED, load_candidates
from retrieval.fusion import cosine
from tests.base import stamp

pytestmark = pytest.mark.django_db


def random_vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(384)]


@pytest.fixture
def owners():
    User = get_user_model()
    return User.objects.create_user("ana"), User.objects.create_user("ben")


def test_it_reads_the_stored_values_exactly_and_only_the_owners(owners):
    rng = random.Random(3)
    owner, other = owners
    mine = [
        Memory.objects.create(
            owner=owner,
            type="semantic",
            content=f"m{i}",
            embedding=random_vector(rng),
            status="active",
        )
        for i in range(3)
    ]
    unembedded = Memory.objects.create(
        owner=owner, type="semantic", content="no vector yet", status="active"
    )
    theirs = Memory.objects.create(
        owner=other, type="semantic", content="t", embedding=random_vector(rng), status="active"
    )
    ids = [m.pk for m in mine] + [unembedded.pk, theirs.pk]

    memories, vectors = load_candidates(owner.pk, ids, timezone.now())

    assert set(memories) == {m.pk for m in mine} | {unembedded.pk}
    assert set(vectors) == {m.pk for m in mine}
    with connection.cursor() as cursor:
        for memory in mine:
            cursor.execute("SELECT embedding::text FROM memories_memory WHERE id = %s", [memory.pk])
            as_text = np.array(cursor.fetchone()[0][1:-1].split(","), dtype=np.float32)
            assert vectors[memory.pk].dtype == np.float64
            assert np.array_equal(vectors[memory.pk], as_text.astype(np.float64))
    assert load_candidates(owner.pk, [], timezone.now()) == ({}, {})
    assert load_candidates(owner.pk, ids, timezone.now(), vectors=False)[1] == {}


def test_it_builds_the_rows_the_orm_builds(owners, django_assert_num_queries):
    owner, _ = owners
    now = timezone.now()
    memory = Memory.objects.create(
        owner=owner,
        type="preference",
        content="Prefers an aisle seat — «always».",
        status="active",
        entity_refs=["Lisbon", "Ana"],
        confidence=0.7,
        source="import",
        session_id="s-1",
        metadata={"nested": {"a": [1, 2]}, "é": "ü"},
        created_at=now - timedelta(days=3),
        last_confirmed_at=now - timedelta(days=1),
    )
    stamp(memory, now - timedelta(hours=2))
    loaded = load_candidates(owner.pk, [memory.pk], now)[0][memory.pk]
    expected = Memory.objects.defer("embedding", "tsv").get(pk=memory.pk)
    assert loaded.get_deferred_fields() == set(DEFERRED)
    for field in Memory._meta.concrete_fields:
        if field.attname in ("embedding", "tsv"):
            continue
        # A deferred field reads the same on first use.
        got, want = getattr(loaded, field.attname), getattr(expected, field.attname)
        assert got == want, field.attname
        assert type(got) is type(want), field.attname
    assert loaded.created_at.isoformat() == expected.created_at.isoformat()
    # The stamp comes with the row, in the ORM's zone; one never written reads None.
    stamped_at = expected.last_retrieved_at
    with django_assert_num_queries(0):
        assert loaded.last_retrieved_at == stamped_at == now - timedelta(hours=2)
        assert loaded.last_retrieved_at.tzinfo == stamped_at.tzinfo
    unstamped = Memory.objects.create(owner=owner, type="semantic", content="b", status="active")
    found = load_candidates(owner.pk, [unstamped.pk], timezone.now())[0]
    with django_assert_num_queries(0):
        assert found[unstamped.pk].last_retrieved_at is None
    # Deferred, not missing: read on first use, like the ORM's deferred fields.
    assert loaded.owner == owner
    assert loaded.embedding is None
    assert list(loaded.chain()) == [loaded]


def test_it_keeps_to_what_a_recall_at_as_of_may_return(owners):
    owner, _ = owners
    now = timezone.now()
    active = Memory.objects.create(
        owner=owner,
        type="semantic",
        content="a",
        status="active",
        created_at=now - timedelta(hours=1),
    )
    later = Memory.objects.create(
        owner=owner,
        type="semantic",
        content="b",
        status="active",
        created_at=now + timedelta(hours=1),
    )
    proposed = Memory.objects.create(owner=owner, type="semantic", content="c")
    ids = [active.pk, later.pk, proposed.pk]
    assert set(load_candidates(owner.pk, ids, now)[0]) == {active.pk}


def test_cosine_matches_the_textbook_formula():
    rng = random.Random(5)
    a, b = random_vector(rng), random_vector(rng)
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5
    assert cosine(a, b) == pytest.approx(dot / norms, rel=1e-12)
    assert cosine(a, [0.0] * 384) == 0.0
    assert cosine(None, b) is None
