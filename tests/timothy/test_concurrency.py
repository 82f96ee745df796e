"""Work on threads of its own, each on its own connection, within a deadline
(timothy/concurrency.py): the rules the recall legs, the retrieval stamp and
consolidation share."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from timothy.concurrency import (
    ThreadPool,
    gather,
    local_settings,
    map_in_order,
    must_run_inline,
    set_for_session,
    set_local,
)


def test_it_gives_up_on_work_that_has_not_answered_by_the_deadline():
    release = threading.Event()
    pool = ThreadPool("test-gather", 2)
    try:
        waiting = pool.submit(release.wait, 60)
        answered: Future = Future()
        answered.set_result(["a"])
        done, late = gather({"answered": answered, "waiting": waiting}, timeout=0)
        assert done == {"answered": ["a"]}
        assert late == ["waiting"]
    finally:
        release.set()
        pool.drain()


def test_it_runs_work_on_threads_and_keeps_the_order():
    callers: set[int] = set()

    def square(n: int) -> int:
        callers.add(threading.get_ident())
        return n * n

    assert list(map_in_order(square, [1, 2, 3, 4], workers=2)) == [1, 4, 9, 16]
    assert threading.get_ident() not in callers


@pytest.mark.django_db
def test_it_runs_work_inline_inside_a_transaction():
    callers: set[int] = set()

    def square(n: int) -> int:
        callers.add(threading.get_ident())
        return n * n

    assert must_run_inline()
    assert list(map_in_order(square, [1, 2, 3], workers=2)) == [1, 4, 9]
    assert callers == {threading.get_ident()}


def timeout() -> str:
    """This connection's statement timeout, as PostgreSQL shows it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout')")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_it_sets_run_time_parameters_for_one_transaction_only():
    before = timeout()
    with transaction.atomic(), connection.cursor() as cursor:
        set_local(cursor, {"statement_timeout": "1234"})
        assert timeout() == "1234ms"
    assert timeout() == before
    with transaction.atomic(), connection.cursor() as cursor:
        with local_settings(cursor, {"statement_timeout": "4321"}):
            assert timeout() == "4321ms"
        assert timeout() == before
    with transaction.atomic(), connection.cursor() as cursor:
        # Not put back: the rest of the transaction keeps it, the next one not.
        with local_settings(cursor, {"statement_timeout": "2345"}, restore=False):
            assert timeout() == "2345ms"
        assert timeout() == "2345ms"
    assert timeout() == before


@pytest.mark.django_db(transaction=True)
def test_it_sets_a_parameter_for_the_session_once_and_again_on_a_new_connection():
    try:
        with CaptureQueriesContext(connection) as first, connection.cursor() as cursor:
            set_for_session(cursor, "statement_timeout", "1500")
        assert len(first) == 1
        # It outlives statements and transactions, and is not sent again.
        with transaction.atomic():
            assert timeout() == "1500ms"
        assert timeout() == "1500ms"
        with CaptureQueriesContext(connection) as again, connection.cursor() as cursor:
            set_for_session(cursor, "statement_timeout", "1500")
        assert len(again) == 0
        # A connection opened again has the server's default: set it again.
        connection.close()
        assert timeout() == "0"
        with connection.cursor() as cursor:
            set_for_session(cursor, "statement_timeout", "1500")
        assert timeout() == "1500ms"
        with (
            transaction.atomic(),
            connection.cursor() as cursor,
            pytest.raises(RuntimeError, match="outside a transaction"),
        ):
            set_for_session(cursor, "statement_timeout", "2500")
        assert timeout() == "1500ms"
    finally:
        connection.close()
