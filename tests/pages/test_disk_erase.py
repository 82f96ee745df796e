"""Asking for an erase from disk, and what the page and the API say of it.

The erase itself (VACUUM FULL, the WAL) runs against a served instance in
tests/faults/test_erase_from_disk.py; here, who asks, which erase covers which
redaction, and what each surface answers.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories import redaction
from memories.disk_erase import DiskErase, covering, erase_for, redacted_at
from memories.models import Memory
from memories.tasks import erase_uncovered_redactions

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory(alice):
    return Memory.remember(alice, "The safe's code is 4417.", Memory.Type.SEMANTIC)


def page_state(client, memory: Memory) -> str:
    body = client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    match = re.search(r'data-disk-erase="(\w+)"', body)
    return match.group(1) if match else ""


def test_the_redact_page_asks_for_it_when_ticked_and_the_memory_page_follows_it(
    alice_client, memory
):
    form = alice_client.get(reverse("memory-redact", args=[memory.pk])).content.decode()
    assert re.search(r'name="erase_from_disk" value="yes" checked', form)

    alice_client.post(
        reverse("memory-redact", args=[memory.pk]),
        {"confirmed": "yes", "scope": "version", "reason": "by mistake", "erase_from_disk": "yes"},
    )

    [erase] = DiskErase.objects.all()
    assert (erase.state, erase.via, erase.requested_by_id) == ("requested", "page", memory.owner_id)
    assert page_state(alice_client, memory) == "requested"

    DiskErase.objects.filter(pk=erase.pk).update(
        state="running", started_at=timezone.now(), step=3, steps=14, doing="rewriting x"
    )
    assert page_state(alice_client, memory) == "running"
    assert (
        "step 3 of 14 (rewriting x)"
        in alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    )

    DiskErase.objects.filter(pk=erase.pk).update(state="complete", finished_at=timezone.now())
    assert page_state(alice_client, memory) == "complete"


def test_unticked_it_waits_for_the_daily_job_and_the_page_offers_it(alice_client, memory):
    alice_client.post(
        reverse("memory-redact", args=[memory.pk]),
        {"confirmed": "yes", "scope": "version", "reason": "by mistake"},
    )
    assert not DiskErase.objects.exists()
    assert page_state(alice_client, memory) == "none"

    alice_client.post(reverse("memory-erase-from-disk", args=[memory.pk]))
    alice_client.post(reverse("memory-erase-from-disk", args=[memory.pk]))

    assert DiskErase.objects.count() == 1  # asking again shares the waiting one
    assert page_state(alice_client, memory) == "requested"


def test_a_memory_not_redacted_is_not_erased_from_disk(alice_client, memory):
    alice_client.post(reverse("memory-erase-from-disk", args=[memory.pk]))
    assert not DiskErase.objects.exists()
    assert page_state(alice_client, memory) == ""


def test_only_an_erase_started_after_the_redaction_covers_it(alice, memory):
    redaction.redact(memory, reason="by mistake")
    at = redacted_at(memory)
    before = DiskErase.objects.create(
        via="api", state="complete", started_at=at - timedelta(seconds=1), finished_at=at
    )
    assert covering(at) is None
    assert erase_for(memory) is None

    after = DiskErase.objects.create(
        via="api",
        state="complete",
        started_at=at + timedelta(seconds=1),
        finished_at=at + timedelta(seconds=5),
    )
    assert erase_for(memory) == after != before


def test_the_daily_job_has_nothing_to_erase_without_a_redaction(memory):
    assert erase_uncovered_redactions() == "nothing to erase from disk"
    assert not DiskErase.objects.exists()
