"""The ``DiskErase`` model: one erase from disk and how far it got. The
erase itself is memories/disk_erase.py; the model lives apart so that
memories.models can register it without importing the erase, which uses
the memories and their events."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class DiskErase(models.Model):
    """One erase from disk: it covers every redaction committed before ``started_at``."""

    class State(models.TextChoices):
        REQUESTED = "requested", "Requested"
        RUNNING = "running", "Running"
        COMPLETE = "complete", "Complete"
        FAILED = "failed", "Failed"

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.PROTECT, null=True, blank=True, related_name="+"
    )
    # page, api, command, or schedule (the daily job).
    via = models.CharField(max_length=16)
    requested_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=16, choices=State.choices, default=State.REQUESTED)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    step = models.PositiveSmallIntegerField(default=0)
    steps = models.PositiveSmallIntegerField(default=0)
    # What the step is doing ("rewriting memories_memory"); never any memory's text.
    doing = models.CharField(max_length=200, blank=True, default="")
    # The summary once complete (what it rewrote, what it did about the WAL), or the error.
    outcome = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [models.Index(fields=["state", "requested_at"], name="disk_erase_state")]

    def __str__(self) -> str:
        return f"erase from disk {self.pk} ({self.state})"

    def as_dict(self) -> dict:
        def stamp(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "id": self.pk,
            "state": self.state,
            "requested_at": stamp(self.requested_at),
            "started_at": stamp(self.started_at),
            "finished_at": stamp(self.finished_at),
            "step": self.step,
            "steps": self.steps,
            "doing": self.doing,
            "outcome": self.outcome,
        }
