"""`createtoken USERNAME [--name NAME]`: issue an API token, creating the owner if needed.

The secret is the last line of the output, so scripts can take it with `tail -n 1`.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import transaction

from memories.management.base import SchemaCommand
from memories.tokens import ApiToken


class Command(SchemaCommand):
    help = "Create an API token for USERNAME (creating the user if needed); prints it last."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label to tell the token apart.")

    def handle(self, *args, username: str, name: str, **options) -> None:
        username = username.strip()
        if not username:
            raise CommandError("Give a user name.")
        max_name = ApiToken._meta.get_field("name").max_length
        if len(name) > max_name:
            raise CommandError(f"The token name is longer than {max_name} characters.")
        User = get_user_model()
        with transaction.atomic():
            owner, created = User.objects.get_or_create(**{User.USERNAME_FIELD: username})
            if created:
                # No password: the account logs in only after `changepassword`.
                owner.set_unusable_password()
                owner.save()
            token, secret = ApiToken.issue(owner, name)
        if created:
            self.stdout.write(
                f"Created user {username!r} (no password yet; set one with "
                f"`python manage.py changepassword {username}` to use the pages)."
            )
        self.stdout.write(
            f"New API token {token.prefix}… for {username!r}. Copy it now: it is not shown "
            "again. Use it as 'Authorization: Bearer <token>'."
        )
        self.stdout.write(secret)
