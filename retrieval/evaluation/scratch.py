"""A throw-away database for evaluations.

The store never deletes, so an evaluation must not load its conversations into
the real database. ``scratch_database()`` creates a fresh database on the same
PostgreSQL server, migrates it, points the default connection at it for the
duration of the block (the recall entry point reads through the default
connection), and drops it afterwards, on errors and Ctrl-C too.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections

logger = logging.getLogger(__name__)

SCRATCH_PREFIX = "timothy_eval_"


def scratch_name() -> str:
    # The pid says which process made it; the random part keeps reused pids apart.
    return f"{SCRATCH_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"


def database_exists(name: str, alias: str = DEFAULT_DB_ALIAS) -> bool:
    with connections[alias]._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


@contextmanager
def scratch_database(alias: str = DEFAULT_DB_ALIAS) -> Iterator[str]:
    """Create, migrate and switch to a fresh database; yield its name; drop it."""
    connection = connections[alias]
    original_name = connection.settings_dict["NAME"]
    name = scratch_name()
    quoted = connection.ops.quote_name(name)
    # CREATE/DROP DATABASE cannot run inside a transaction: use a separate
    # autocommit connection to the server's maintenance database.
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {quoted}")
    try:
        _switch(alias, name)
        call_command("migrate", database=alias, interactive=False, verbosity=0)
        yield name
    finally:
        _switch(alias, original_name)
        try:
            with connection._nodb_cursor() as cursor:
                # FORCE ends connections other threads may still hold to it.
                cursor.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        except Exception:
            logger.exception("Could not drop the scratch database %s; drop it by hand", name)
            raise


def _switch(alias: str, name: str) -> None:
    connection = connections[alias]
    connection.close()
    # The wrapper and the settings share one dict in Django, but set both as
    # Django's own test-database set-up does, in case a caller replaced either.
    connection.settings_dict["NAME"] = name
    settings.DATABASES[alias]["NAME"] = name
