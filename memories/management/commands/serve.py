"""`make run`: everything the service needs, in one foreground command.

Checks the database (pgvector 0.8 or newer), migrates, makes sure the owner
account exists, then runs the public site, the internal listener and the
django-q2 worker until Ctrl-C, which stops all of them and the embedded
PostgreSQL. Meanwhile it supervises them: a child that dies is restarted
after a pause that grows while it keeps dying, and so is the embedded
PostgreSQL. No child outlives serve (docs/reliability.md): its children get
SIGTERM when it dies, however it dies (Linux's parent-death signal), and it
records them in ``serve.json`` in the data folder, so that the next serve
stops whatever an earlier one left running (and refuses to start while an
earlier one still runs there).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import ERROR
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, OperationalError, connection
from django.utils import timezone

from memories.models import ApiToken
from retrieval import index as retrieval_index
from timothy import database

# Seconds children get to stop after Ctrl-C before they are killed.
STOP_GRACE_SECONDS = 10
# Seconds between two looks at the children.
SUPERVISE_INTERVAL = 0.5
# Pause before restarting a child that exited, doubled at each quick failure...
RESTART_FIRST_SECONDS = 1
RESTART_MAX_SECONDS = 30
# ...and back to the first pause once a child had run this long.
STABLE_SECONDS = 60
# What serve records in the data folder: its pid and its children's, locked
# for as long as it runs.
STATE_FILE = "serve.json"

PUBLIC_SITE = "public site"
INTERNAL_LISTENER = "internal listener"
WORKER = "worker"


def gunicorn_command(bind: str, workers: int, app: str, *, access_log: bool = True) -> list[str]:
    """The gunicorn command line of one listener (`bench_search` runs the same)."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--config",
        "python:timothy.gunicorn_conf",
        *(["--access-logfile", "-"] if access_log else []),
        "--log-level",
        "warning",
        "--bind",
        bind,
        "--workers",
        str(workers),
        # Each worker takes a connection only when one of its threads is free to
        # answer it, and closes it after the answer: the requests that wait, wait in
        # the listening socket's one queue, in the order they came, for whichever
        # worker frees a thread first. With kept-alive connections each client stays
        # with the worker it first reached, and the busier worker's clients wait
        # longer (32 clients split 14 / 18 waited 450 and 600 ms): bench_load's p95
        # fell from 977 to 608 ms (docs/reliability.md). A new connection to the
        # loopback address costs less than a millisecond.
        "--threads",
        str(settings.WEB_THREADS),
        "--worker-connections",
        str(settings.WEB_THREADS),
        "--keep-alive",
        "0",
        app,
    ]


def public_site_command(bind: str, workers: int, *, access_log: bool = True) -> list[str]:
    return gunicorn_command(bind, workers, "timothy.wsgi:application", access_log=access_log)


class Command(BaseCommand):
    help = "Run the service: public site and API, internal listener, background worker."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--check-only",
            action="store_true",
            help="Check the database and migrate, then exit without serving.",
        )
        parser.add_argument(
            "--web-workers",
            type=int,
            default=settings.WEB_WORKERS,
            help="gunicorn worker processes for the public site (default 2).",
        )

    def handle(self, *args, check_only: bool = False, web_workers: int = 2, **options) -> None:
        # manage.py started the embedded PostgreSQL already; serve may also be
        # called from code (call_command), so it makes sure itself.
        database.ensure_running()
        if not check_only:
            # Before anything else: an earlier serve that still runs, or what a
            # dead one left, would otherwise hold the ports and the queue.
            self.state = self.claim_data_dir()
            check_addresses_free()
        self.check_database()
        call_command("migrate", interactive=False, verbosity=0)
        self.check_retrieval_index()
        self.check_embeddings()
        self.ensure_owner()
        if check_only:
            self.stdout.write("Database ready; --check-only, so not serving.")
            return
        self.serve(web_workers)

    def check_database(self) -> None:
        try:
            connection.ensure_connection()
            version = database.check_pgvector(connection)
        except database.DatabaseUnsuitable as error:
            raise CommandError(str(error))
        except OperationalError as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CommandError(f"Cannot reach the PostgreSQL server: {first_line}")
        where = "embedded PostgreSQL" if settings.EMBEDDED_DATABASE else "DATABASE_URL"
        self.stdout.write(f"Database: {where}, pgvector {version}.")

    def check_retrieval_index(self) -> None:
        """Every part of the retrieval index installed and switched on; warn when the
        sample disagrees (recall still answers, from stale counts)."""
        problems = retrieval_index.check()
        for problem in problems:
            self.stderr.write(f"{problem.id}: {problem.msg} {problem.hint}")
        if any(problem.level >= ERROR for problem in problems):
            raise CommandError("The retrieval index is incomplete (above); not serving.")

    def check_embeddings(self) -> None:
        if settings.EMBEDDING_PROVIDER == "none":
            self.stdout.write("Embeddings: none (the vector leg is skipped).")
            return
        from retrieval.embeddings import check_embedding_dimensions

        try:
            check_embedding_dimensions()
        except Exception as error:
            raise CommandError(str(error))
        # Memories whose embedding task was lost (claimed by the worker when it
        # stopped) or never queued (imports) get their vectors in the background.
        from django_q.tasks import async_task

        async_task("memories.tasks.embed_missing")
        self.stdout.write(
            f"Embeddings: {settings.EMBEDDING_PROVIDER}, "
            f"{settings.EMBEDDING_DIMENSIONS} dimensions; catching up on missing ones "
            "in the background."
        )

    def ensure_owner(self) -> None:
        User = get_user_model()
        username = settings.OWNER_USERNAME
        if User.objects.filter(username=username).exists():
            return
        password = secrets.token_urlsafe(12)
        owner = User.objects.create_superuser(username, password=password)
        _, raw_token = ApiToken.issue(owner, name="created by make run")
        # Shown once: only hashes are stored.
        self.stdout.write(
            self.style.SUCCESS("\nCreated the owner account (shown only this once):")
            + f"\n  sign in at http://{settings.PUBLIC_ADDR}/login/"
            + f"\n  username: {username}\n  password: {password}"
            + f"\n  API token: {raw_token}"
            + "\n  (change the password in the admin; make more tokens on the Tokens page)\n"
        )

    def claim_data_dir(self) -> ServeState:
        """Lock the data folder's serve.json for as long as this serve runs; refuse
        if another serve holds it; stop what a dead one left running."""
        state = ServeState(Path(settings.DATA_DIR) / STATE_FILE)
        earlier = state.acquire()
        stopped, killed = stop_leftovers(earlier)
        if stopped:
            names = [child["name"] for child in earlier.get("children", [])]
            running = {child["name"] for child, _ in stopped}
            listed = and_list([name for name in names if name in running])
            count = sum(len(members) for _, members in stopped)
            self.stdout.write(
                f"An earlier serve (pid {earlier.get('pid', '?')}) had died and left its "
                f"{listed} running ({count} process{'es' if count != 1 else ''}); "
                + (
                    f"stopped them ({killed} with SIGKILL, having ignored SIGTERM)."
                    if killed
                    else "stopped them."
                )
            )
        state.record([])
        return state

    def serve(self, web_workers: int) -> None:
        children = [
            Child(name, command, niceness=settings.WORKER_NICENESS if name == WORKER else 0)
            for name, command in child_commands(web_workers).items()
        ]
        state = getattr(self, "state", None) or self.claim_data_dir()
        embedded = settings.EMBEDDED_DATABASE
        postgres_restarts = Backoff()
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            for child in children:
                child.start()
                state.record(children)
            self.stdout.write(
                f"Serving http://{settings.PUBLIC_ADDR}/ (pages, API at /v1/, docs at "
                f"/api/docs/); internal listener on {settings.INTERNAL_ADDR}"
                + ("" if settings.SERVICE_TOKEN else " (refuses calls: no TIMOTHY_SERVICE_TOKEN)")
                + ". Ctrl-C stops everything."
            )
            while not stopping:
                for child in children:
                    if self.supervise(child):
                        state.record(children)
                if embedded:
                    self.supervise_postgres(postgres_restarts)
                time.sleep(SUPERVISE_INTERVAL)
        finally:
            self.stdout.write("Stopping…")
            stop_all(children)
            state.record([])
            if embedded:
                connection.close()
                database.stop_embedded(settings.DATA_DIR)
            state.release()
            self.stdout.write("Stopped.")

    def supervise(self, child: Child) -> bool:
        """Restart a child that exited, after a pause that grows while it keeps failing;
        whether it was started again."""
        if child.process is not None and child.process.poll() is not None:
            code = child.process.returncode
            how = (
                f"was killed by {signal.Signals(-code).name}"
                if code < 0 and -code in signal.valid_signals()
                else f"exited with code {code}"
            )
            # What it left behind (a crashed gunicorn's workers, qcluster's
            # worker processes) goes with it: they hold the port and the queue.
            end_group(child.process.pid)
            delay = child.backoff.next_delay(ran_for=time.monotonic() - child.started_at)
            child.process = None
            child.restart_at = time.monotonic() + delay
            self.stderr.write(f"The {child.name} {how}; restarting it in {delay:g} s.")
            if child.name == WORKER and settings.EMBEDDED_DATABASE:
                self.release_claimed_tasks()
        if child.process is None and time.monotonic() >= child.restart_at:
            child.start()
            self.stdout.write(f"Restarted the {child.name} (pid {child.process.pid}).")
            return True
        return False

    def supervise_postgres(self, restarts: Backoff) -> None:
        """Start the embedded PostgreSQL again if it is gone (killed, crashed, stopped),
        and say when it runs again, whoever started it.

        A start can fail while the killed server's old processes still hold its
        shared memory, and then waits out a pause; meanwhile the restarted
        worker's own start-up (``manage.py`` starts the server a command needs)
        may start it first. That too ends the outage.
        """
        if database.embedded_running(settings.DATA_DIR):
            if restarts.failures:
                self.postgres_runs_again(restarts)
            return
        if time.monotonic() < restarts.not_before:
            return
        self.stderr.write("The embedded PostgreSQL is not running; starting it again.")
        try:
            database.start_embedded(settings.DATA_DIR)
        except Exception as error:
            delay = restarts.next_delay(ran_for=0)
            restarts.not_before = time.monotonic() + delay
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else error
            self.stderr.write(f"Could not start it ({first_line}); trying again in {delay:g} s.")
            return
        self.postgres_runs_again(restarts)

    def postgres_runs_again(self, restarts: Backoff) -> None:
        restarts.reset()
        connection.close()
        self.stdout.write("The embedded PostgreSQL runs again.")

    def release_claimed_tasks(self) -> None:
        """Hand the tasks a dead worker had claimed to the next one.

        django-q2 hides a claimed task for Q_CLUSTER["retry"] seconds (over an
        hour), so what the dead worker held would wait that long. With the
        embedded database this worker is the only one, so every claim is its.
        """
        from django_q.models import OrmQ

        try:
            connection.close()
            released = OrmQ.objects.filter(lock__gt=timezone.now()).update(lock=timezone.now())
        except DatabaseError as error:
            self.stderr.write(f"Could not release the tasks it held: {error}".strip())
            return
        finally:
            connection.close()
        if released:
            self.stdout.write(f"Released {released} task(s) it held, for the next worker.")


def child_commands(web_workers: int) -> dict[str, list[str]]:
    """The three processes of the service, in the order they start."""
    return {
        PUBLIC_SITE: public_site_command(settings.PUBLIC_ADDR, web_workers),
        INTERNAL_LISTENER: gunicorn_command(
            settings.INTERNAL_ADDR, 1, "timothy.internal_wsgi:application"
        ),
        WORKER: [sys.executable, "manage.py", "qcluster"],
    }


class Backoff:
    """Pauses before a restart: 1, 2, 4, … up to RESTART_MAX_SECONDS while a
    process keeps failing within STABLE_SECONDS of starting."""

    def __init__(self) -> None:
        self.failures = 0
        self.not_before = 0.0

    def next_delay(self, ran_for: float) -> float:
        if ran_for >= STABLE_SECONDS:
            self.failures = 0
        delay = min(RESTART_FIRST_SECONDS * 2**self.failures, RESTART_MAX_SECONDS)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0
        self.not_before = 0.0


@dataclass
class Child:
    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_at: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)
    # Steps below serve's own priority (the background worker's, WORKER_NICENESS).
    niceness: int = 0

    def start(self) -> None:
        # Each child leads a process group of its own: Ctrl-C reaches only us,
        # and whatever it starts (gunicorn's workers, qcluster's processes)
        # can be stopped with it, even after it died. It gets SIGTERM when
        # serve dies, and stops its own processes as it does on Ctrl-C.
        self.process = subprocess.Popen(
            self.command,
            start_new_session=True,
            preexec_fn=die_with(os.getpid(), niceness=self.niceness),
        )
        self.started_at = time.monotonic()

    def record(self) -> dict:
        """What serve.json keeps of it: enough to find its group after serve died."""
        pid = self.process.pid
        try:
            started = psutil.Process(pid).create_time()
        except psutil.Error:
            started = time.time()
        return {"name": self.name, "pid": pid, "started": started}


# --- Dying with serve, and what a dead serve left ------------------------------------

# prctl(2): the signal a process gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (AttributeError, OSError):  # not Linux: the state file alone cleans up
    _prctl = None


def die_with(parent: int, *, niceness: int = 0):
    """``preexec_fn`` of a child that must get SIGTERM when ``parent`` dies, at
    ``niceness`` steps below the parent's priority.

    Linux sends it when the *thread* that forked the child ends: serve starts
    its children from its main thread, which lives as long as serve does.
    """

    def arrange() -> None:
        if niceness:
            os.nice(niceness)
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # it died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return arrange


class ServeState:
    """``serve.json`` in the data folder: the pid of the serve that runs there and
    its children's, under an exclusive lock held for as long as that serve runs.

    The lock, not the pid, says whether it runs: the kernel drops it when the
    process ends however it ends, and a reused pid cannot hold it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> dict:
        """Take the lock; what the previous serve recorded (empty if nothing).

        Raises ``CommandError`` (one sentence) if a serve holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = read_state(fd).get("pid")
            os.close(fd)
            running = f"as pid {pid}; stop it first (Ctrl-C in its terminal, or kill {pid})"
            raise CommandError(
                f"serve is already running on {self.path.parent} "
                + (running if pid else "; stop it first")
                + ", or give this one another TIMOTHY_DATA_DIR."
            ) from None
        self.fd = fd
        return read_state(fd)

    def record(self, children: list[Child]) -> None:
        state = {
            "pid": os.getpid(),
            "started": psutil.Process().create_time(),
            "children": [child.record() for child in children if child.process is not None],
        }
        data = (json.dumps(state, indent=1) + "\n").encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_state(fd: int) -> dict:
    try:
        state = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def leftovers(child: dict) -> list[psutil.Process]:
    """What still runs of a recorded child: the processes of its group.

    A group's id is its first process's pid, which Linux reuses for nothing
    while any process of the group lives; a member also started after it.
    """
    try:
        pgid, started = int(child["pid"]), float(child["started"])
    except (KeyError, TypeError, ValueError):
        return []
    members = []
    for process in psutil.process_iter():
        try:
            if (
                process.pid != os.getpid()
                and os.getpgid(process.pid) == pgid
                and process.create_time() >= started - 1
                and process.status() != psutil.STATUS_ZOMBIE
            ):
                members.append(process)
        except (psutil.Error, OSError):
            continue
    return members


def stop_leftovers(earlier: dict) -> tuple[list[tuple[dict, list[psutil.Process]]], int]:
    """Stop what a dead serve's children left running; what was found, and how
    many needed SIGKILL.

    SIGTERM to each group's leader (gunicorn and qcluster stop their own
    processes), or to every member if the leader is gone, and SIGCONT (a
    stopped process acts on nothing else); SIGKILL after STOP_GRACE_SECONDS.
    """
    found = []
    for child in earlier.get("children", []):
        if isinstance(child, dict) and (members := leftovers(child)):
            found.append((child, members))
    everyone = [process for _, members in found for process in members]
    for child, members in found:
        leader = [process for process in members if process.pid == int(child["pid"])]
        for process in leader or members:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGTERM)
        for process in members:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGCONT)
    _, alive = psutil.wait_procs(everyone, timeout=STOP_GRACE_SECONDS)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=STOP_GRACE_SECONDS)
    return found, len(alive)


def and_list(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def check_addresses_free() -> None:
    """Refuse, in one sentence, to serve on an address another process listens on
    (gunicorn would retry, pause, and be restarted with ever longer pauses)."""
    for variable, address in (
        ("TIMOTHY_PUBLIC_ADDR", settings.PUBLIC_ADDR),
        ("TIMOTHY_INTERNAL_ADDR", settings.INTERNAL_ADDR),
    ):
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        if not port.isdigit():
            continue
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                # As gunicorn binds: a port in TIME_WAIT is free.
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, int(port)))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                continue  # gunicorn says what is wrong with it
            raise CommandError(
                f"Cannot serve: {address} is already in use{listener_of(int(port))}; "
                f"stop that, or set {variable} to another address."
            ) from None


def listener_of(port: int) -> str:
    """ " by pid N (its command line)" for the process listening on ``port``, if known."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return ""
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if conn.pid is None:
                return ""
            try:
                command = " ".join(psutil.Process(conn.pid).cmdline())
            except psutil.Error:
                command = ""
            if len(command) > 80:
                command = command[:77] + "…"
            return f" by pid {conn.pid}" + (f" ({command})" if command else "")
    return ""


def end_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_all(children: list[Child]) -> None:
    """SIGTERM every child (gunicorn and qcluster stop their own processes in
    order), wait for them, then SIGKILL whatever is left of any of their groups."""
    groups = [child.process.pid for child in children if child.process is not None]
    for child in children:
        if child.process is not None and child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in children:
        if child.process is None:
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
    while any(group_alive(pgid) for pgid in groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pgid in groups:
        end_group(pgid, signal.SIGKILL)
    for child in children:
        if child.process is not None and child.process.poll() is None:
            child.process.wait()
