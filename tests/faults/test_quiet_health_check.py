"""The check before a request's first query: no round trip on a quiet, idle
connection; a connection the server ended is replaced, not handed on."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from timothy.database import quiet_and_idle
from timothy.drill import wait_for


@pytest.fixture
def health_checks(monkeypatch):
    """Django's per-request check on, as `make run` has it; the calls of the
    real check (``SELECT 1``) counted."""
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    calls = []
    real = connection.is_usable

    def counted() -> bool:
        calls.append(1)
        return real()

    monkeypatch.setattr(connection, "is_usable", counted)
    connection.ensure_connection()
    yield calls
    connection.health_check_done = True


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_quiet_idle_connection_is_kept_without_asking_the_server(health_checks):
    pid = backend_pid()
    kept = connection.connection
    connection.health_check_done = False  # a new request begins
    connection.close_if_health_check_failed()
    assert health_checks == []
    assert connection.connection is kept
    assert backend_pid() == pid


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_ended_is_replaced(health_checks):
    pid = backend_pid()
    ended = connection.connection
    # Another session ends ours, as a restart or a killed backend would.
    params = {
        key: value
        for key, value in connection.get_connection_params().items()
        if key not in ("cursor_factory", "context", "prepare_threshold")
    }
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(lambda: not quiet_and_idle(ended), 30, "the ended session to show")
    connection.health_check_done = False  # the next request begins
    connection.close_if_health_check_failed()
    assert health_checks == [1]  # the real check, which failed
    assert connection.connection is None
    assert backend_pid() != pid
