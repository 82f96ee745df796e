"""`createtoken --scopes`, `--pause` and `--resume`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memories.models import ApiToken

pytestmark = pytest.mark.django_db


def createtoken(*args: str) -> list[str]:
    out = StringIO()
    call_command("createtoken", *args, stdout=out)
    return out.getvalue().splitlines()


def test_it_issues_a_token_with_the_given_scopes(alice):
    lines = createtoken("alice", "--scopes", "propose, read")

    token = ApiToken.authenticate(lines[-1])
    assert token.scopes == ["read", "propose"]
    assert "(scopes: read, propose)" in lines[-2]


def test_without_scopes_a_token_may_do_everything(alice):
    assert ApiToken.authenticate(createtoken("alice")[-1]).scopes == ["read", "propose", "write"]


@pytest.mark.parametrize(
    ("scopes", "message"),
    [("read,delete", "Unknown scope 'delete'"), (" , ", "Give at least one scope")],
)
def test_it_refuses_unknown_or_no_scopes(alice, scopes, message):
    with pytest.raises(CommandError, match=message):
        createtoken("alice", "--scopes", scopes)
    assert not ApiToken.objects.exists()


def test_it_pauses_and_resumes_by_prefix(alice):
    raw = createtoken("alice", "--name", "laptop")[-1]
    token = ApiToken.authenticate(raw)

    assert "Paused the token" in createtoken("alice", "--pause", token.prefix + "…")[0]
    token.refresh_from_db()
    assert token.is_paused

    assert "Resumed the token" in createtoken("alice", "--resume", raw)[0]
    token.refresh_from_db()
    assert not token.is_paused


def test_it_pauses_only_the_named_owners_tokens(alice, bob):
    raw = createtoken("bob")[-1]
    with pytest.raises(CommandError, match="'alice' has no live token starting with"):
        createtoken("alice", "--pause", raw[:10])
    assert not ApiToken.authenticate(raw).is_paused
