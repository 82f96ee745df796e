"""Every command's --owner is looked up one way, with one message (memories/management/base.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memories.management.base import owner_by_username

NOBODY = (
    "There is no owner named 'nobody'; create the account first "
    "(`python manage.py createtoken nobody` creates it with a token)."
)

COMMANDS = [
    ["consolidate", "--owner", "nobody"],
    ["reembed", "--owner", "nobody"],
    ["import_memories", "-", "--owner", "nobody"],
    ["export_memories", "--owner", "nobody"],
    ["redact", "1", "--owner", "nobody", "--reason", "test"],
    ["recall", "seat", "--owner", "nobody"],
    ["find_entities", "--owner", "nobody"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[args[0] for args in COMMANDS])
def test_it_names_the_missing_owner_the_same_way(db, args):
    with pytest.raises(CommandError) as raised:
        call_command(*args, stdout=StringIO(), stderr=StringIO())
    assert str(raised.value) == NOBODY


def test_it_finds_an_existing_owner(alice):
    assert owner_by_username("alice") == alice
