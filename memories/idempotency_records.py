"""The stored first answers of ``Idempotency-Key`` calls (memories/idempotency.py).

A table of the memories app (``memories_idempotencyrecord``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

# A record's request hash once a redaction rewrote its answer: the same key
# replays whatever the body (memories/redaction.py).
REDACTED_REQUEST = "redacted"


class IdempotencyRecord(models.Model):
    """The first answer to a creating call made with an ``Idempotency-Key``."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="+")
    # SHA-256 of the key, never the key: a client may build keys from what it stores.
    key_digest = models.CharField(max_length=64)
    # Method and path the key was used on, and a hash of the body: the same key
    # with a different request is a client error, not a replay. After a
    # redaction of what it wrote, the hash is gone (memories/idempotency.py).
    endpoint = models.CharField(max_length=200)
    request_hash = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key_digest"], name="idempotency_owner_key"),
        ]


def expiry_cutoff() -> datetime:
    """Records created before this moment no longer replay."""
    return timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)


def forget_expired_keys() -> int:
    """Delete every record past its time; the number deleted. Run by the daily job."""
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=expiry_cutoff()).delete()
    return deleted
