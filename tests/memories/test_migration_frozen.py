"""A migration does what it did when it was written, whatever the live code has
become: it imports none of the service's modules, and memories 0018 builds the
graph 0018 built (ef_construction 128; 0019 made it 96)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.db import connection

from tests.base import migrate_to

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = sorted(ROOT.glob("*/migrations/*.py"))
# Code a migration may import: Django, pgvector, the standard library, and the
# migrations packages themselves (frozen modules such as _frozen_vector_index).
ALLOWED = ("django", "pgvector", "__future__", "datetime", "importlib", "os")
ALLOWED_PACKAGES = ("memories.migrations", "retrieval.migrations")
# A field whose default is a callable names it in the migration, and Django
# needs that name to stay importable (and calls it to fill existing rows).
FIELD_DEFAULTS = {("0024_token_scopes_and_pause.py", "memories.api_tokens")}


def imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules.append(node.module or "")
    return modules


def test_no_migration_imports_the_service_s_code():
    assert len(MIGRATIONS) > 30
    live = [
        f"{path.parent.parent.name}/{path.name}: {module}"
        for path in MIGRATIONS
        for module in imported_modules(path)
        if module.split(".")[0] not in ALLOWED
        and not module.startswith(ALLOWED_PACKAGES)
        and (path.name, module) not in FIELD_DEFAULTS
    ]
    assert live == []


def graph_definition() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_embedding_hnsw'")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_0018_builds_the_graph_it_built_when_written():
    try:
        migrate_to("memories", "0017_rate_limit_unlogged")
        assert "vector_cosine_ops" in graph_definition()  # 0004's float32 graph

        migrate_to("memories", "0018_hnsw_half_precision")

        assert "halfvec_cosine_ops" in graph_definition()
        assert "ef_construction='128'" in graph_definition()
    finally:
        # Where every later test expects the schema: the latest migration.
        migrate_to("memories")
    assert "ef_construction='96'" in graph_definition()
