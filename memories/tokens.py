"""API tokens: bearer secrets for the public API, of which only a hash is stored.

The model of ``memories.auth`` (authentication), the tokens page and
``createtoken``; a table of the memories app (``memories_apitoken``).
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from memories.models import MemoryIsPermanent

TOKEN_PREFIX = "tm_"


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

    objects = ApiTokenQuerySet.as_manager()

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
    def issue(cls, owner, name: str = "") -> tuple[ApiToken, str]:
        """Create a token; return it and the raw secret (shown once, never stored)."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            owner=owner, name=name, prefix=raw[:10], digest=cls.digest_of(raw)
        )
        return token, raw

    @classmethod
    def authenticate(cls, raw: str) -> ApiToken | None:
        if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
            return None
        token = (
            cls.objects.live()
            .select_related("owner")
            .filter(digest=cls.digest_of(raw), owner__is_active=True)
            .first()
        )
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

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def delete(self, *args, **kwargs):
        raise MemoryIsPermanent()
