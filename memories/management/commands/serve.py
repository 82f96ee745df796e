"""`make run`: everything the service needs, in one foreground command.

Checks the database (pgvector 0.8 or newer), migrates, makes sure the owner
account exists, then runs the public site, the internal listener and the
django-q2 worker until Ctrl-C, which stops all of them and the embedded
PostgreSQL. Meanwhile it supervises them: a child that dies is restarted
after a pause that grows while it keeps dying, and so is the embedded
PostgreSQL. Nothing outlives serve (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

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
# Request threads of each gunicorn worker.
WEB_THREADS = 4

PUBLIC_SITE = "public site"
INTERNAL_LISTENER = "internal listener"
WORKER = "worker"


# Threads per gunicorn worker process.
WEB_THREADS = 4


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
        "--threads",
        str(WEB_THREADS),
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

    def serve(self, web_workers: int) -> None:
        children = [Child(name, command) for name, command in child_commands(web_workers).items()]
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
            self.stdout.write(
                f"Serving http://{settings.PUBLIC_ADDR}/ (pages, API at /v1/, docs at "
                f"/api/docs/); internal listener on {settings.INTERNAL_ADDR}"
                + ("" if settings.SERVICE_TOKEN else " (refuses calls: no TIMOTHY_SERVICE_TOKEN)")
                + ". Ctrl-C stops everything."
            )
            while not stopping:
                for child in children:
                    self.supervise(child)
                if embedded:
                    self.supervise_postgres(postgres_restarts)
                time.sleep(SUPERVISE_INTERVAL)
        finally:
            self.stdout.write("Stopping…")
            stop_all(children)
            if embedded:
                connection.close()
                database.stop_embedded(settings.DATA_DIR)
            self.stdout.write("Stopped.")

    def supervise(self, child: Child) -> None:
        """Restart a child that exited, after a pause that grows while it keeps failing."""
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

    def start(self) -> None:
        # Each child leads a process group of its own: Ctrl-C reaches only us,
        # and whatever it starts (gunicorn's workers, qcluster's processes)
        # can be stopped with it, even after it died.
        self.process = subprocess.Popen(self.command, start_new_session=True)
        self.started_at = time.monotonic()


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
