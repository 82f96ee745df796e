"""The retrieval index as a Django system check (``manage.py check --database default``).

Skipped while migrations are pending: ``migrate`` runs database checks before
it installs the very parts this one looks for. A server out of reach is a
warning (retrieval.W006) rather than silence: the index was not looked at.
"""

from __future__ import annotations

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection


@checks.register(checks.Tags.database)
def retrieval_index_installed(app_configs=None, databases=None, **kwargs):
    from memories.schema import schema_problem
    from retrieval import index

    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    try:
        connection.ensure_connection()
    except DatabaseError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "no reason given"
        return [
            checks.Warning(
                f"The retrieval index was not checked: the PostgreSQL server cannot be "
                f"reached ({reason}).",
                hint="Start it (`make run` starts the embedded one) or correct DATABASE_URL.",
                id="retrieval.W006",
            )
        ]
    if schema_problem():
        return []
    return index.check()
