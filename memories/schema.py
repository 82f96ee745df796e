"""Whether the database's tables are in place for this version of the code:
the commands (memories/management/base.py) and the system check
(retrieval/checks.py) say so in one sentence."""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor


def schema_problem() -> str | None:
    """One sentence saying what to run when the tables are missing or behind
    the code (or the server cannot be reached); None when all is in place."""
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        applied = executor.loader.applied_migrations
    except DatabaseError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"Cannot reach the PostgreSQL server: {first_line}"
    if not pending:
        return None
    if not applied:
        return (
            "The database has no tables yet: run `make run` once first (it creates them "
            "and the owner account), or `.venv/bin/python manage.py migrate`."
        )
    return (
        f"The database is {len(pending)} migration(s) behind this version of Timothy "
        "Memory: run `.venv/bin/python manage.py migrate` (or `make run`, which migrates) "
        "first."
    )
