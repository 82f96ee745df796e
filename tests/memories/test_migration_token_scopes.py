"""The memories migration that gives tokens scopes: a token made before it keeps
every scope (read, propose, write) and is not paused."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from memories.models import ApiToken
from tests.base import has_column, migrate_to

pytestmark = pytest.mark.django_db(transaction=True)


def _before_scopes() -> str:
    loader = MigrationLoader(connection)
    (name,) = [
        key[1]
        for key in loader.disk_migrations
        if key[0] == "memories" and key[1].endswith("token_scopes_and_pause")
    ]
    (dependency,) = [d for d in loader.disk_migrations[("memories", name)].dependencies]
    return dependency[1]


def test_a_token_made_before_scopes_keeps_every_scope(alice):
    try:
        migrate_to("memories", _before_scopes())
        assert not has_column("memories_apitoken", "scopes")
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO memories_apitoken (owner_id, name, prefix, digest, created_at) "
                "VALUES (%s, 'old laptop', 'tm_oldtoke', %s, now()) RETURNING id",
                [alice.pk, ApiToken.digest_of("tm_oldtoken")],
            )
            (token_id,) = cursor.fetchone()
    finally:
        migrate_to("memories")
    token = ApiToken.objects.get(pk=token_id)
    assert token.scopes == ["read", "propose", "write"]
    assert not token.is_paused
    assert ApiToken.authenticate("tm_oldtoken") == token
