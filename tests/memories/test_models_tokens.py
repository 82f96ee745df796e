"""API tokens: hashed at rest, tied to one owner, revocable."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import TOKEN_PREFIX, ApiToken

pytestmark = pytest.mark.django_db


def test_it_authenticates_each_token_as_its_own_owner(alice, bob):
    _, alices_secret = ApiToken.issue(alice, "laptop")
    _, bobs_secret = ApiToken.issue(bob)

    assert ApiToken.authenticate(alices_secret).owner == alice
    assert ApiToken.authenticate(bobs_secret).owner == bob


def test_it_rejects_unknown_malformed_and_tampered_tokens(alice):
    _, secret = ApiToken.issue(alice)

    assert ApiToken.authenticate(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    assert ApiToken.authenticate(secret.removeprefix(TOKEN_PREFIX)) is None
    assert ApiToken.authenticate("") is None
    assert ApiToken.authenticate(secret + "x" * 300) is None


def test_it_stops_accepting_a_revoked_token(alice):
    token, secret = ApiToken.issue(alice)
    _, other_secret = ApiToken.issue(alice)

    token.revoke()

    assert token.is_revoked
    assert ApiToken.authenticate(secret) is None
    assert ApiToken.authenticate(other_secret).owner == alice
    assert ApiToken.objects.live().count() == 1


def test_it_keeps_the_first_revocation_time(alice):
    token, _ = ApiToken.issue(alice)
    token.revoke()
    first = token.revoked_at

    ApiToken.objects.get(pk=token.pk).revoke()

    token.refresh_from_db()
    assert token.revoked_at == first


def test_it_refuses_tokens_of_a_deactivated_owner(alice):
    _, secret = ApiToken.issue(alice)
    alice.is_active = False
    alice.save()

    assert ApiToken.authenticate(secret) is None


def test_it_stores_only_a_hash_and_a_short_prefix(alice):
    token, secret = ApiToken.issue(alice)

    assert secret.startswith(TOKEN_PREFIX)
    assert len(secret) > 40
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret.startswith(token.prefix) and len(token.prefix) <= 10
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM memories_apitoken WHERE id = %s", [token.pk])
        stored = [str(value) for value in cursor.fetchone()]
    assert not any(secret in value for value in stored)
    assert not any(secret[len(token.prefix) :][:12] in value for value in stored)


def test_it_issues_a_different_secret_each_time(alice):
    secrets = {ApiToken.issue(alice)[1] for _ in range(5)}

    assert len(secrets) == 5


def test_it_stamps_last_use_at_most_once_a_minute(alice):
    token, secret = ApiToken.issue(alice)
    assert token.last_used_at is None

    ApiToken.authenticate(secret)
    token.refresh_from_db()
    first_use = token.last_used_at
    ApiToken.authenticate(secret)
    token.refresh_from_db()
    assert first_use is not None
    assert token.last_used_at == first_use

    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first_use - timedelta(minutes=5))
    ApiToken.authenticate(secret)
    token.refresh_from_db()
    assert token.last_used_at > first_use - timedelta(minutes=5)


def test_it_loads_the_token_and_its_owner_as_the_orm_does(alice, django_assert_num_queries):
    token, secret = ApiToken.issue(alice, "laptop")
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    alice.first_name = "Alice"
    alice.last_login = timezone.now() - timedelta(days=2)
    alice.save()
    expected = ApiToken.objects.select_related("owner").get(pk=token.pk)

    with django_assert_num_queries(1):
        found = ApiToken.authenticate(secret)
        owner = found.owner

    def fields(instance):
        return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}

    assert fields(found) == fields(expected)
    assert fields(owner) == fields(expected.owner)
    assert found.last_used_at.tzinfo is not None
    assert not found._state.adding and found._state.db == "default"
    assert owner.check_password("wrong") is False
