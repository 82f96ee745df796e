"""`createtoken USERNAME [--name NAME] [--scopes read,propose,write]`: issue an API
token, creating the owner if needed. `createtoken USERNAME --pause PREFIX` and
`--resume PREFIX` pause and resume one of the owner's tokens.

The secret is the last line of the output, so scripts can take it with `tail -n 1`.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import transaction

from memories.api_tokens import SCOPES, ApiToken, parse_scopes
from memories.management.base import SchemaCommand


class Command(SchemaCommand):
    help = (
        "Create an API token for USERNAME (creating the user if needed); prints it last. "
        "With --pause or --resume PREFIX, pause or resume one of USERNAME's tokens instead."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label to tell the token apart.")
        parser.add_argument(
            "--scopes",
            default=",".join(SCOPES),
            help=f"What the token may do, comma-separated (default {','.join(SCOPES)}): "
            "read (list, search, chain), propose (stage memories, extraction), "
            "write (remember, confirm, reject, supersede, archive, redact).",
        )
        toggle = parser.add_mutually_exclusive_group()
        toggle.add_argument(
            "--pause",
            metavar="PREFIX",
            help="Pause the owner's token that starts with PREFIX (refused with 403 until "
            "resumed).",
        )
        toggle.add_argument(
            "--resume", metavar="PREFIX", help="Resume the owner's paused token PREFIX."
        )

    def handle(self, *args, username: str, name: str, scopes: str, **options) -> None:
        username = username.strip()
        if not username:
            raise CommandError("Give a user name.")
        if options.get("pause") or options.get("resume"):
            self._toggle(username, options.get("pause"), options.get("resume"))
            return
        try:
            chosen = parse_scopes(scopes)
        except ValueError as error:
            raise CommandError(str(error))
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
            token, secret = ApiToken.issue(owner, name, scopes=chosen)
        if created:
            self.stdout.write(
                f"Created user {username!r} (no password yet; set one with "
                f"`python manage.py changepassword {username}` to use the pages)."
            )
        self.stdout.write(
            f"New API token {token.prefix}… for {username!r} (scopes: "
            f"{', '.join(token.scopes)}). Copy it now: it is not shown again. Use it as "
            "'Authorization: Bearer <token>'."
        )
        self.stdout.write(secret)

    def _toggle(self, username: str, pause: str | None, resume: str | None) -> None:
        prefix = (pause or resume or "").strip().rstrip("…")
        User = get_user_model()
        tokens = ApiToken.objects.live().filter(**{f"owner__{User.USERNAME_FIELD}": username})
        # The stored prefix is the token's first 10 characters, as the Tokens page shows it.
        length = ApiToken.PREFIX_LENGTH
        if len(prefix) >= length:
            found = list(tokens.filter(prefix=prefix[:length]))
        else:
            found = list(tokens.filter(prefix__startswith=prefix))
        if not prefix or not found:
            raise CommandError(f"{username!r} has no live token starting with {prefix!r}.")
        if len(found) > 1:
            raise CommandError(f"More than one of {username!r}'s tokens starts with {prefix!r}.")
        token = found[0]
        if pause:
            token.pause()
            self.stdout.write(
                f"Paused the token {token.prefix}… ({token.name or 'unnamed'}): it is refused "
                "with 403 until resumed."
            )
        else:
            token.resume()
            self.stdout.write(f"Resumed the token {token.prefix}… ({token.name or 'unnamed'}).")
