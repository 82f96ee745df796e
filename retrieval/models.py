"""Tables the retrieval legs read besides the memories themselves."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OwnerEntity(models.Model):
    """How many of an owner's active memories name an entity (lower-cased).

    The entity leg looks the query's word stretches up here, one index probe
    each, instead of scanning memories. A trigger on the memory table keeps the
    counts (migration 0002): they are right after every write, whatever wrote.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.DO_NOTHING, related_name="+")
    key = models.TextField()
    memories = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="owner_entity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.memories})"
