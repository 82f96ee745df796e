"""Erase from disk: what a redaction leaves in the database's files, removed.

A redaction (``Memory.redact``, memories/redaction.py) takes the text out of
every row, and the plain ``VACUUM`` that follows takes the old row versions out
of what any query can see; but PostgreSQL does not zero the space it frees, so
the bytes stay in the tables' and indexes' files, and in the WAL. An erase
from disk removes them:

1. it waits (up to ``WAIT_FOR_OLDER_TRANSACTIONS``) for transactions that
   began before it to end, since a row version one of them may still see is
   copied into the rewritten table;
2. ``VACUUM (FULL, ANALYZE)`` of every table that can hold a memory's text
   (``TABLES``): each is written anew with its indexes and the old files are
   emptied; then ``VACUUM FULL pg_statistic`` (a superuser only);
3. the WAL: ``pg_switch_wal()`` and ``CHECKPOINT``, twice, so every segment
   written before the erase is behind the checkpoint and removed. The embedded
   server runs with ``wal_recycle = off`` (timothy/database.py), so such a
   segment is deleted rather than renamed for reuse with its old bytes in it.

An erase interrupted (its worker or the database stopped) stays marked running
until the next run takes it up again: the task's retry, the next request or
the daily job.

One erase covers every redaction committed before it started, whoever's: a
``DiskErase`` row says who asked, through what, and how far it got (step,
steps, what it is doing), and the memory's page and the API's
``erase_from_disk`` action read it. Requests made while no erase has started
yet share one run. ``VACUUM FULL`` locks each table while it rewrites it, so
it runs in the background worker; the daily job runs one when a redaction is
not yet covered, so none waits longer than a day (docs/privacy.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import (
    DEFAULT_DB_ALIAS,
    OperationalError,
    connection,
    connections,
    transaction,
)
from django.db.models import Q
from django.utils import timezone

from memories.disk_erase_records import DiskErase
from memories.models import Memory, MemoryEvent
from memories.redaction import CLEAR_STATISTICS

logger = logging.getLogger(__name__)

# pg_advisory_lock key: one erase at a time.
ERASE_LOCK = 0x6572_6173  # "eras"
TASK = "memories.tasks.erase_from_disk"
# How long an erase waits for transactions older than itself before it goes on.
WAIT_FOR_OLDER_TRANSACTIONS = timedelta(minutes=10)
# Every table a memory's text (or a search for it) can reach, in the order erased.
TABLES = (
    "memories_memory",
    "memories_memoryevent",
    "retrieval_posting",
    "retrieval_ownerentity",
    "memories_accessrecord",
    "memories_idempotencyrecord",
    "django_admin_log",
    "django_q_task",
    "django_q_ormq",
    "django_session",
)
WAL_ROUNDS = 2
# A rewrite waits this long for its table's lock, and tries this many times,
# this far apart, before the erase fails (and says so).
LOCK_WAIT = timedelta(seconds=2)
LOCK_TRIES = 150
LOCK_PAUSE = timedelta(seconds=2)


# --- asking, and what covers a memory ------------------------------------------------


def request_erase(*, owner=None, via: str, queue: bool = True) -> DiskErase:
    """An erase that has not started yet (a new one, queued once this commits unless
    ``queue`` is false, or the one already waiting): it will cover every redaction
    committed so far."""
    with transaction.atomic():
        waiting = (
            DiskErase.objects.select_for_update()
            .filter(state=DiskErase.State.REQUESTED)
            .order_by("requested_at")
            .first()
        )
        if waiting is not None:
            return waiting
        erase = DiskErase.objects.create(requested_by=owner, via=via)
        if queue:
            transaction.on_commit(lambda: _queue(erase.pk))
    return erase


def _queue(erase_id: int) -> None:
    try:
        from django_q.tasks import async_task

        async_task(TASK, erase_id)
    except Exception:
        # The daily job runs every erase still requested.
        logger.exception("Could not queue erase from disk %s; the daily job will run it", erase_id)


def covering(redacted_at: datetime) -> DiskErase | None:
    """The erase that covers (or will cover) a redaction committed at ``redacted_at``:
    a complete one started after it, else a running one started after it, else one
    not started yet, else the last one that failed after it; None when none is asked."""
    erases = DiskErase.objects.all()
    for state, after in (
        (DiskErase.State.COMPLETE, "started_at"),
        (DiskErase.State.RUNNING, "started_at"),
        (DiskErase.State.REQUESTED, None),
        (DiskErase.State.FAILED, "started_at"),
    ):
        found = erases.filter(state=state)
        if after:
            found = found.filter(**{f"{after}__gt": redacted_at})
        found = found.order_by("-requested_at", "-id").first()
        if found is not None:
            return found
    return None


def redacted_at(memory) -> datetime | None:
    """When ``memory`` was redacted (its redacted event), None if it is not."""

    if memory.status != Memory.Status.REDACTED:
        return None
    return (
        MemoryEvent.objects.filter(memory=memory, action=MemoryEvent.Action.REDACTED)
        .order_by("-at")
        .values_list("at", flat=True)
        .first()
    )


def erase_for(memory) -> DiskErase | None:
    """The erase that covers a redacted memory, None if it has none (or is not redacted)."""
    at = redacted_at(memory)
    return covering(at) if at else None


def uncovered_redactions() -> bool:
    """Whether a redaction was committed after the last complete erase started."""

    last = (
        DiskErase.objects.filter(state=DiskErase.State.COMPLETE)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    redactions = MemoryEvent.objects.filter(action=MemoryEvent.Action.REDACTED)
    if last is not None:
        redactions = redactions.filter(at__gte=last)
    return redactions.exists()


# --- the erase -----------------------------------------------------------------------


def run(erase_id: int) -> str:
    """Run the erase ``erase_id`` and every other one still requested; a summary.

    One at a time (an advisory lock): a second run waits for the first, then
    finds its request already covered, or covers what came since.
    """
    own = connections[DEFAULT_DB_ALIAS].copy()
    own.set_autocommit(True)
    try:
        with own.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [ERASE_LOCK])
            try:
                return _run_locked(erase_id, cursor)
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [ERASE_LOCK])
    finally:
        own.close()


def _run_locked(erase_id: int, cursor) -> str:
    started = timezone.now()
    # Holding the lock, an erase still marked running was interrupted (its worker
    # or the database stopped): it runs again with the requested ones.
    waiting = Q(state=DiskErase.State.REQUESTED, requested_at__lte=started) | Q(
        state=DiskErase.State.RUNNING
    )
    batch = list(DiskErase.objects.filter(waiting).values_list("pk", flat=True).order_by("pk"))
    if erase_id not in batch:
        erase = DiskErase.objects.filter(pk=erase_id).first()
        return f"erase {erase_id} already {erase.state if erase else 'gone'}"
    mine = DiskErase.objects.filter(pk__in=batch)
    known = set(connection.introspection.table_names())
    tables = [table for table in TABLES if table in known]
    steps = 1 + len(tables) + 1 + WAL_ROUNDS
    mine.update(state=DiskErase.State.RUNNING, started_at=started, step=0, steps=steps)
    step = 0

    def progress(doing: str) -> None:
        nonlocal step
        step += 1
        mine.update(step=step, doing=doing)
        logger.info("Erase from disk %s: step %d of %d, %s", erase_id, step, steps, doing)

    try:
        progress("waiting for older transactions to end")
        waited = _wait_for_older_transactions(cursor, started, mine)
        for table in tables:
            progress(f"rewriting {table}")
            _clear_statistics(cursor, table)
            _rewrite(cursor, table)
        progress("rewriting the column statistics")
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        superuser = cursor.fetchone()[0]
        if superuser:
            cursor.execute("VACUUM FULL pg_catalog.pg_statistic")
        wal = _retire_wal(cursor, superuser, progress)
    except Exception as error:
        mine.update(
            state=DiskErase.State.FAILED,
            finished_at=timezone.now(),
            outcome=f"{type(error).__name__}: {error}"[:2000],
        )
        logger.exception("Erase from disk %s failed", erase_id)
        raise
    parts = [f"rewrote {', '.join(tables)}"]
    parts.append("and pg_statistic" if superuser else "(not pg_statistic: not a superuser)")
    if waited:
        parts.append(waited)
    parts.append(wal)
    outcome = "; ".join(parts)
    mine.update(
        state=DiskErase.State.COMPLETE,
        finished_at=timezone.now(),
        step=steps,
        doing="",
        outcome=outcome,
    )
    logger.info("Erase from disk %s complete: %s", erase_id, outcome)
    return outcome


def _wait_for_older_transactions(cursor, started: datetime, mine) -> str:
    """Wait until no other session holds a snapshot taken before ``started``; what
    was left waiting (empty when nothing was)."""
    deadline = time.monotonic() + WAIT_FOR_OLDER_TRANSACTIONS.total_seconds()
    while True:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND datname = current_database() AND backend_xmin IS NOT NULL "
            "AND xact_start < %s",
            [started],
        )
        older = cursor.fetchone()[0]
        if not older:
            return ""
        mine.update(doing=f"waiting for {older} older transaction(s) to end")
        if time.monotonic() > deadline:
            return (
                f"{older} transaction(s) older than the erase were still open after "
                f"{WAIT_FOR_OLDER_TRANSACTIONS}: a row version they could see may remain"
            )
        time.sleep(1)


def _rewrite(cursor, table: str) -> None:
    """VACUUM (FULL, ANALYZE) ``table``, waiting at most ``LOCK_WAIT`` for its lock each
    time: queued behind a long query, the rewrite's lock would hold every other reader
    of the table back too. It tries again until ``LOCK_TRIES`` have failed."""
    cursor.execute("SET lock_timeout = %s", [f"{int(LOCK_WAIT.total_seconds() * 1000)}ms"])
    try:
        for attempt in range(1, LOCK_TRIES + 1):
            try:
                cursor.execute(f"VACUUM (FULL, ANALYZE) {connection.ops.quote_name(table)}")
                return
            except OperationalError as error:
                if "lock timeout" not in str(error) or attempt == LOCK_TRIES:
                    raise
                time.sleep(LOCK_PAUSE.total_seconds())
    finally:
        cursor.execute("RESET lock_timeout")


def _clear_statistics(cursor, table: str) -> None:

    cursor.execute(f"SELECT to_regprocedure('{CLEAR_STATISTICS}') IS NOT NULL")
    if cursor.fetchone()[0]:
        cursor.execute(
            "SELECT pg_clear_attribute_stats(current_schema(), %s, attname, false) "
            "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped",
            [table, connection.ops.quote_name(table)],
        )


def _retire_wal(cursor, superuser: bool, progress: Callable[[str], None]) -> str:
    """Switch to a new WAL segment and checkpoint, ``WAL_ROUNDS`` times, so that every
    segment written before is behind the checkpoint; what became of them."""
    cursor.execute("SELECT pg_walfile_name(pg_current_wal_lsn())")
    before = cursor.fetchone()[0]
    for round_ in range(WAL_ROUNDS):
        progress(f"retiring the WAL ({round_ + 1} of {WAL_ROUNDS})")
        try:
            cursor.execute("SELECT pg_switch_wal()")
            cursor.execute("CHECKPOINT")
        except Exception as error:  # no privilege on an outside server
            logger.warning("Erase from disk could not switch the WAL: %s", error)
            return f"could not switch the WAL ({error}): the server keeps its segments"
    cursor.execute("SHOW wal_recycle")
    recycle = cursor.fetchone()[0]
    if not superuser:
        return "switched the WAL; whether the old segments are gone is the server's to say"
    cursor.execute(
        "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' AND name <= %s",
        [before],
    )
    left = cursor.fetchone()[0]
    if left:
        return (
            f"switched the WAL, but {left} segment(s) written before the erase remain "
            "(replication slots, wal_keep_size or archiving hold them)"
        )
    if recycle == "on":
        return (
            "switched the WAL; the old segments were renamed for reuse (wal_recycle = on) "
            "and keep their bytes until overwritten"
        )
    return "switched the WAL and removed every segment written before the erase"
