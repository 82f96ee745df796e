"""`make run`: everything the service needs, in one foreground command.

Checks the database (pgvector 0.8 or newer), migrates, makes sure the owner
account exists, then runs the public site, the internal listener and the
django-q2 worker until Ctrl-C, which stops all of them and the embedded
PostgreSQL.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from memories.models import ApiToken
from timothy import database

# Seconds children get to stop after Ctrl-C before they are killed.
STOP_GRACE_SECONDS = 10


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
            default=int(os.environ.get("TIMOTHY_WEB_WORKERS", "2")),
            help="gunicorn worker processes for the public site (default 2).",
        )

    def handle(self, *args, check_only: bool = False, web_workers: int = 2, **options) -> None:
        self.check_database()
        call_command("migrate", interactive=False, verbosity=0)
        # The per-token rate limit is counted in a cache table in PostgreSQL.
        call_command("createcachetable", verbosity=0)
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
        where = "embedded PostgreSQL" if not os.environ.get("DATABASE_URL") else "DATABASE_URL"
        self.stdout.write(f"Database: {where}, pgvector {version}.")

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
        commands = {
            "public site": public_site_command(settings.PUBLIC_ADDR, web_workers),
            "internal listener": gunicorn_command(
                settings.INTERNAL_ADDR, 1, "timothy.internal_wsgi:application"
            ),
            "worker": [sys.executable, "manage.py", "qcluster"],
        }
        children: dict[str, subprocess.Popen] = {}
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            for name, command in commands.items():
                # Each child in its own process group, so Ctrl-C reaches only us
                # and we stop them in order.
                children[name] = subprocess.Popen(command, start_new_session=True)
            self.stdout.write(
                f"Serving http://{settings.PUBLIC_ADDR}/ (pages, API at /v1/, docs at "
                f"/api/docs/); internal listener on {settings.INTERNAL_ADDR}"
                + ("" if settings.SERVICE_TOKEN else " (refuses calls: no TIMOTHY_SERVICE_TOKEN)")
                + ". Ctrl-C stops everything."
            )
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"The {name} exited with code {child.returncode}.")
                        stopping = True
                time.sleep(0.5)
        finally:
            self.stop_children(children)
            if not os.environ.get("DATABASE_URL"):
                connection.close()
                database.stop_embedded(settings.DATA_DIR)
            self.stdout.write("Stopped.")

    def stop_children(self, children: dict[str, subprocess.Popen]) -> None:
        for child in children.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
