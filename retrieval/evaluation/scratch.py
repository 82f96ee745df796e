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

from timothy.scratch import create_database, drop_database

logger = logging.getLogger(__name__)

SCRATCH_PREFIX = "timothy_eval_"


def scratch_name() -> str:
    # The pid says which process made it; the random part keeps reused pids apart.
    return f"{SCRATCH_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"


@contextmanager
def scratch_database(alias: str = DEFAULT_DB_ALIAS) -> Iterator[str]:
    """Create, migrate and switch to a fresh database; yield its name; drop it."""
    original_name = connections[alias].settings_dict["NAME"]
    name = scratch_name()
    create_database(name, alias)
    try:
        _switch(alias, name)
        call_command("migrate", database=alias, interactive=False, verbosity=0)
        yield name
    finally:
        _switch(alias, original_name)
        try:
            drop_database(name, alias)
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
