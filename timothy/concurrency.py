"""Work on threads of its own, each on its own database connection, within a deadline.

Recall runs its legs at once and stamps what it returned after answering;
consolidation merges batches side by side. They share these rules:

- Inside an open transaction the work runs inline, one piece after the other,
  on the caller's connection (``must_run_inline``): another connection could
  not see the transaction's rows.
- On a thread, each piece of work gets the thread's own connection, fresh from
  ``close_old_connections``; after it, a long-lived pool's thread keeps its
  connection for the next piece (``KEEP_THREAD_CONNECTIONS``; the tests close it
  so their database can be dropped), a short-lived one closes it.
- ``gather`` waits for pieces of work until a deadline; what has not answered
  by then is given up, never waited for.
- Run-time parameters (HNSW's search width, a statement timeout) are set for
  one transaction by ``set_local`` or ``local_settings``, never with a bare SET.
  The one exception is a long-lived pool's thread, whose connection runs
  nothing but that pool's work: ``set_for_session`` sets a parameter there once
  for the connection's life, sparing each piece of work a transaction of its
  own (BEGIN, the setting, COMMIT: three round trips).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connection, connections

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def must_run_inline(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether work must stay on the caller's connection: inside a transaction,
    whose rows other connections could not see."""
    return connections[using].in_atomic_block


def on_own_connection(function: Callable[..., T], *args, keep: bool) -> T:
    """``function(*args)`` on this thread's own connection; ``keep``: leave the
    connection open for the thread's next piece of work (if still healthy)."""
    close_old_connections()
    try:
        return function(*args)
    finally:
        if keep:
            close_old_connections()
        else:
            connection.close()


class ThreadPool:
    """A long-lived pool of threads, started on first use; each piece of work runs
    on its thread's own connection."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, function: Callable[..., T], *args) -> Future:
        keep = settings.KEEP_THREAD_CONNECTIONS
        return self._pool().submit(on_own_connection, function, *args, keep=keep)

    def drain(self) -> None:
        """Wait until every piece of work submitted so far has finished; the next
        ``submit`` starts a new pool."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.size, thread_name_prefix=self.name
                )
            return self._executor


def gather(futures: Mapping[K, Future], timeout: float) -> tuple[dict[K, object], list[K]]:
    """Wait up to ``timeout`` seconds for ``futures``: the results of those done,
    and the keys of those given up (cancelled if they had not started)."""
    wait(futures.values(), timeout=max(0.0, timeout))
    done: dict[K, object] = {}
    late: list[K] = []
    for key, future in futures.items():
        if future.done():
            done[key] = future.result()
        else:
            future.cancel()
            late.append(key)
    return done, late


def map_in_order(function: Callable[..., T], items: list, *args, workers: int) -> Iterator[T]:
    """``function(item, *args)`` for each item, yielded in order.

    With more than one item, ``workers`` threads run them at once, each on its own
    connection, closed when its thread is done; inline inside a transaction.
    """
    if len(items) < 2 or workers < 2 or must_run_inline():
        for item in items:
            yield function(item, *args)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(
            lambda item: on_own_connection(function, item, *args, keep=False), items
        )


# --- run-time parameters for one transaction --------------------------------------


def set_local(cursor, values: Mapping[str, str]) -> None:
    """Set run-time parameters until the current transaction ends (SET LOCAL)."""
    if not values:
        return
    params: list[str] = []
    for name, value in values.items():
        params += [name, value]
    cursor.execute(
        "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in values),
        params,
    )


@contextmanager
def local_settings(cursor, values: Mapping[str, str], *, restore: bool = True) -> Iterator[None]:
    """Set run-time parameters for the current transaction and put them back after.

    On a thread of its own the transaction ends with the work anyway
    (``restore=False`` spares the round trips); inline (inside the caller's
    transaction) the old values must come back. On an error the savepoint's
    rollback restores them by itself. Outside a transaction a local setting
    lasts one statement: the caller opens one around the block.
    """
    if not restore:
        set_local(cursor, values)
        yield
        return
    names = list(values)
    params: list[str] = []
    for name, value in values.items():
        params += [name, name, value]
    # One round trip: read each old value, then set the new one.
    cursor.execute(
        "SELECT " + ", ".join("current_setting(%s, true), set_config(%s, %s, true)" for _ in names),
        params,
    )
    previous = cursor.fetchone()[0::2]
    yield
    # A setting that did not exist yet (pgvector's hnsw.* before its library
    # loads on this connection) has no old value to restore, and '' is not a
    # valid one; being local, it ends with the transaction anyway.
    set_local(
        cursor,
        {name: old for name, old in zip(names, previous, strict=True) if old is not None},
    )


def set_for_session(cursor, name: str, value: str) -> None:
    """Set a run-time parameter for the rest of this connection's session, unless
    it already holds ``value``: one round trip the first time, none after.

    Only for a connection that belongs to a long-lived pool's thread, which runs
    nothing but that pool's work (recall's legs): on any other connection the
    setting would outlive the work and reach whatever runs there next. What was
    set is remembered with the connection that got it, so a connection opened
    again (a restart, ``CONN_MAX_AGE``) is set again.
    """
    database = cursor.db
    if database.in_atomic_block:
        # A rollback would undo the setting behind the memory of it.
        raise RuntimeError("set_for_session() outside a transaction only")
    held = getattr(database, "_session_settings", None)
    if held is None or held[0] is not database.connection:
        held = database._session_settings = (database.connection, {})
    if held[1].get(name) == value:
        return
    cursor.execute("SELECT set_config(%s, %s, false)", [name, value])
    held[1][name] = value


def hnsw_search(ef_search: int, *, max_scan_tuples: int | None = None) -> dict[str, str]:
    """pgvector's run-time parameters for a filtered HNSW search: keep walking the
    graph (relaxed order: sort the rows again) until enough rows pass the filter."""
    values = {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": str(int(ef_search))}
    if max_scan_tuples is not None:
        values["hnsw.max_scan_tuples"] = str(int(max_scan_tuples))
    return values
