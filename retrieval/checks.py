"""The retrieval index as a Django system check (``manage.py check --database default``).

Skipped while migrations are pending (or the server is out of reach):
``migrate`` runs database checks before it installs the very parts this one
looks for.
"""

from __future__ import annotations

from django.core import checks
from django.db import DEFAULT_DB_ALIAS


@checks.register(checks.Tags.database)
def retrieval_index_installed(app_configs=None, databases=None, **kwargs):
    from memories.management.base import schema_problem
    from retrieval import index

    if not databases or DEFAULT_DB_ALIAS not in databases or schema_problem():
        return []
    return index.check()
