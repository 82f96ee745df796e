from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from memories.models import ApiToken

pytestmark = pytest.mark.django_db


def createtoken(*args: str) -> list[str]:
    out = StringIO()
    call_command("createtoken", *args, stdout=out)
    return out.getvalue().splitlines()


def test_it_creates_the_user_says_so_and_prints_the_token_last():
    lines = createtoken("carol", "--name", "laptop")

    carol = get_user_model().objects.get(username="carol")
    assert "Created user 'carol'" in lines[0]
    assert not carol.has_usable_password()
    token = ApiToken.authenticate(lines[-1])
    assert token.owner == carol
    assert token.name == "laptop"


def test_it_issues_a_token_for_an_existing_user_without_creating_one(alice):
    lines = createtoken("alice")

    assert not any("Created user" in line for line in lines)
    assert ApiToken.authenticate(lines[-1]).owner == alice
    assert get_user_model().objects.count() == 1
    assert alice.check_password("alice-password-1")


def test_it_issues_a_new_token_on_every_run(alice):
    first = createtoken("alice")[-1]
    second = createtoken("alice")[-1]

    assert first != second
    assert ApiToken.objects.filter(owner=alice).count() == 2
    assert ApiToken.authenticate(first).owner == ApiToken.authenticate(second).owner == alice


def test_it_refuses_an_empty_username_or_an_overlong_name():
    with pytest.raises(CommandError):
        createtoken(" ")
    with pytest.raises(CommandError):
        createtoken("dave", "--name", "x" * 101)

    assert not ApiToken.objects.exists()
    assert not get_user_model().objects.exists()
