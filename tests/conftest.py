"""Fixtures shared by the whole suite.

Tests run against the embedded PostgreSQL with pgvector (or ``DATABASE_URL``);
pytest-django creates a throw-away test database in it. Set ``TIMOTHY_TEST_DB``
to give concurrent runs their own database name. The settings are
tests/settings.py; the start-up steps ``manage.py`` takes (timothy/startup.py)
are taken here: the data folder when the run starts, the embedded server
before the first test that needs a database.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.base import make_memory  # noqa: F401  (re-exported for tests)
from timothy.database import ensure_running
from timothy.startup import prepare_data_dir


def pytest_configure(config):
    prepare_data_dir()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Runs before pytest-django creates the test database: start the server first."""
    ensure_running()


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


@pytest.fixture(autouse=True)
def fresh_owner_shares(monkeypatch):
    """The vector leg reads the planner's statistics afresh in tests, which
    analyse the table themselves (the cache has its own test)."""
    from retrieval import legs

    monkeypatch.setattr(legs, "OWNER_SHARE_TTL", 0)
    legs._owner_shares.clear()
