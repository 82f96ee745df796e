"""API tokens: bearer secrets for the public API, of which only a hash is stored.

The model of ``memories.auth`` (authentication), the tokens page and
``createtoken``; a table of the memories app (``memories_apitoken``).
"""

from __future__ import annotations

import functools
import hashlib
import secrets

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connection, models
from django.utils import timezone

from memories.rules import MemoryIsPermanent

TOKEN_PREFIX = "tm_"

# What a token may do on the API, narrowest first:
#   read     list, chain and search the owner's memories (and internal retrieve)
#   propose  stage memories for the owner's confirmation queue (create with mode
#            propose, and internal extraction for this owner only)
#   write    remember, and act on memories (confirm, reject, supersede, archive, ...)
SCOPES = ("read", "propose", "write")
SCOPE_HELP = {
    "read": "list, search and read its history",
    "propose": "stage memories for your queue, and send conversations to extraction",
    "write": "remember, confirm, reject, edit, archive and redact",
}


def all_scopes() -> list[str]:
    return list(SCOPES)


def parse_scopes(text: str) -> list[str]:
    """``"read,propose"`` as a list in SCOPES order; ValueError naming an unknown one."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCOPES]
    if unknown:
        raise ValueError(f"Unknown scope {unknown[0]!r}: use one or more of {', '.join(SCOPES)}.")
    if not names:
        raise ValueError(f"Give at least one scope: {', '.join(SCOPES)}.")
    return [scope for scope in SCOPES if scope in names]


class ApiTokenQuerySet(models.QuerySet):
    def live(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)

    def delete(self):
        raise MemoryIsPermanent()


class ApiToken(models.Model):
    """A bearer token for the public API. Only its hash is stored."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    # The first characters of the token, so the owner can tell tokens apart.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # What the token may do (SCOPES); tokens made before scopes existed keep all three.
    scopes = ArrayField(models.CharField(max_length=16), default=all_scopes)
    # A paused token still authenticates, so that it is answered 403 with a
    # sentence saying it is paused, and works again once resumed.
    paused_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    # How many of the secret's first characters ``prefix`` keeps.
    PREFIX_LENGTH = 10

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @staticmethod
    def digest_of(raw: str) -> str:
        # Tokens carry 256 bits of randomness, so a plain SHA-256 is enough;
        # a slow password hash would only slow every request.
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def issue(
        cls, owner, name: str = "", scopes: list[str] | tuple[str, ...] | None = None
    ) -> tuple[ApiToken, str]:
        """Create a token; return it and the raw secret (shown once, never stored).

        ``scopes`` defaults to all of SCOPES."""
        chosen = all_scopes() if scopes is None else [s for s in SCOPES if s in scopes]
        if not chosen:
            raise ValueError(f"A token needs at least one scope: {', '.join(SCOPES)}.")
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            owner=owner,
            name=name,
            prefix=raw[: cls.PREFIX_LENGTH],
            digest=cls.digest_of(raw),
            scopes=chosen,
        )
        return token, raw

    @classmethod
    def authenticate(cls, raw: str) -> ApiToken | None:
        if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
            return None
        token = _live_token_with_owner(cls.digest_of(raw))
        if token is None:
            return None
        now = timezone.now()
        # Stamp at most once a minute: every request must not be a write.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return token

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_paused(self) -> bool:
        return self.paused_at is not None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    def pause(self) -> None:
        if self.paused_at is None and self.revoked_at is None:
            self.paused_at = timezone.now()
            self.save(update_fields=["paused_at"])

    def resume(self) -> None:
        if self.paused_at is not None:
            self.paused_at = None
            self.save(update_fields=["paused_at"])

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def delete(self, *args, **kwargs):
        raise MemoryIsPermanent()


def _live_token_with_owner(digest: str) -> ApiToken | None:
    """The live token of an active owner with this digest, its owner loaded with it.

    What ``ApiToken.objects.live().select_related("owner").filter(digest=...,
    owner__is_active=True)`` loads, in one statement written once per process:
    every API request authenticates, and building that queryset anew cost
    about 1 ms of the 1.9 ms a lookup took (docs/benchmarks.md).
    """
    owner_model = ApiToken._meta.get_field("owner").related_model
    with connection.cursor() as cursor:
        cursor.execute(_token_with_owner_sql(), [digest])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(ApiToken._meta.concrete_fields)
    token = _loaded(ApiToken, row[:split])
    token.owner = _loaded(owner_model, row[split:])
    return token


def _loaded(model, values):
    """An instance of ``model`` from its concrete fields' column values, as the
    ORM loads one (each field's converters, then ``from_db``)."""
    fields = model._meta.concrete_fields
    values = list(values)
    for index, field in enumerate(fields):
        for convert in field.get_db_converters(connection):
            values[index] = convert(values[index], None, connection)
    return model.from_db(connection.alias, [field.attname for field in fields], values)


@functools.cache
def _token_with_owner_sql() -> str:
    quote = connection.ops.quote_name
    owner_model = ApiToken._meta.get_field("owner").related_model

    def column(alias: str, model, name: str) -> str:
        return f"{alias}.{quote(model._meta.get_field(name).column)}"

    selected = [f"t.{quote(field.column)}" for field in ApiToken._meta.concrete_fields] + [
        f"u.{quote(field.column)}" for field in owner_model._meta.concrete_fields
    ]
    owner_pk = f"u.{quote(owner_model._meta.pk.column)}"
    return (
        f"SELECT {', '.join(selected)} "
        f"FROM {quote(ApiToken._meta.db_table)} t JOIN {quote(owner_model._meta.db_table)} u "
        f"ON {owner_pk} = {column('t', ApiToken, 'owner')} "
        f"WHERE {column('t', ApiToken, 'digest')} = %s "
        f"AND {column('t', ApiToken, 'revoked_at')} IS NULL "
        f"AND {column('u', owner_model, 'is_active')}"
    )
