"""The base of every command that reads or writes the service's tables."""

from __future__ import annotations

import argparse

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memories.schema import schema_problem


class SchemaCommand(BaseCommand):
    """Stops with one sentence, not a traceback, when the tables are not there
    yet (a command run before the first `make run`) or are behind the code."""

    def execute(self, *args, **options):
        problem = schema_problem()
        if problem:
            raise CommandError(problem)
        return super().execute(*args, **options)


def owner_by_username(username: str):
    """The account a command's ``--owner`` names; a one-sentence error if there is none."""
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist:
        raise CommandError(
            f"There is no owner named {username!r}; create the account first "
            f"(`python manage.py createtoken {username}` creates it with a token)."
        )


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, or a clear usage error."""
    return _whole_number_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0, or a clear usage error."""
    return _whole_number_at_least(text, 0)


def _whole_number_at_least(text: str, minimum: int) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < minimum:
        raise argparse.ArgumentTypeError(f"{number} is not at least {minimum}")
    return number
