"""Fixtures shared by the whole suite.

Tests run against the embedded PostgreSQL with pgvector (or ``DATABASE_URL``);
pytest-django creates a throw-away test database in it. Set ``TIMOTHY_TEST_DB``
to give concurrent runs their own database name.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.base import make_memory  # noqa: F401  (re-exported for tests)


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def bob(db):
    # Bob must never see anything of Alice's.
    return get_user_model().objects.create_user("bob", password="bob-password-1")


@pytest.fixture(autouse=True)
def exact_bm25_statistics(monkeypatch):
    """BM25 reads exact corpus statistics in tests (the cache has its own test)."""
    from retrieval import bm25

    monkeypatch.setattr(bm25, "BM25_CORPUS_STATS_TTL", 0)
    bm25._corpus_cache.clear()
