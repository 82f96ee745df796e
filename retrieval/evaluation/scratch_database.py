"""A throw-away database for evaluations and benchmarks.

The store never deletes, so an evaluation must not load its conversations into
the real database. ``scratch_database()`` creates a fresh database on the same
PostgreSQL server, migrates it, points the default connection at it for the
duration of the block (the recall entry point reads through the default
connection), and drops it afterwards, on errors and Ctrl-C too. A benchmark
may name it, keep it, and reuse a kept one to skip its fill.
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

from timothy.scratch import create_database, database_exists, drop_database

logger = logging.getLogger(__name__)

SCRATCH_PREFIX = "timothy_eval_"


def scratch_name() -> str:
    # The pid says which process made it; the random part keeps reused pids apart.
    return f"{SCRATCH_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"


class ScratchRefused(ValueError):
    """The name given is the service's own database."""


@contextmanager
def scratch_database(
    name: str | None = None,
    *,
    alias: str = DEFAULT_DB_ALIAS,
    keep: bool = False,
    reuse: bool = False,
) -> Iterator[str]:
    """Create, migrate and switch to a fresh database; yield its name; drop it.

    ``name`` (default: a new unique one) is dropped first if it exists, unless
    ``reuse`` opens it as it is; ``keep`` leaves it behind afterwards.
    """
    original_name = connections[alias].settings_dict["NAME"]
    name = name or scratch_name()
    if name == original_name:
        raise ScratchRefused("The scratch database must not be the service's own database.")
    if not reuse or not database_exists(name, alias):
        connections[alias].close()
        drop_database(name, alias)
        create_database(name, alias)
    try:
        _switch(alias, name)
        call_command("migrate", database=alias, interactive=False, verbosity=0)
        yield name
    finally:
        _switch(alias, original_name)
        if not keep:
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
