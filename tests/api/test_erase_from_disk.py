"""The API's erase_from_disk: asked with a redaction or after it, answered with its state.

The test settings run queued tasks at once (django-q2 sync), so the erase runs
for real, on the test database, as soon as the redaction commits.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from memories.disk_erase import DiskErase
from memories.models import Memory
from memories.tasks import erase_uncovered_redactions


@pytest.fixture
def memory(alice):
    return Memory.remember(alice, "The safe's code is 4417.", Memory.Type.SEMANTIC)


def test_it_is_refused_on_a_memory_not_redacted(alice_api, memory):
    url = f"/v1/memories/{memory.pk}"
    refused = alice_api.post(url, {"action": "erase_from_disk"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "not_redacted"
    mixed = alice_api.post(url, {"action": "archive", "erase_from_disk": True})
    assert mixed.status_code == 400, mixed.text
    assert not DiskErase.objects.exists()


def test_a_redaction_asks_for_it_and_the_action_answers_its_state(alice_api, memory):
    url = f"/v1/memories/{memory.pk}"
    redacted = alice_api.post(
        url, {"action": "redact", "reason": "by mistake", "erase_from_disk": True}
    )
    assert redacted.status_code == 200, redacted.text
    [erase] = DiskErase.objects.all()
    assert (erase.via, erase.requested_by_id) == ("api", memory.owner_id)
    assert erase.state == "complete", erase.outcome
    assert "rewrote memories_memory" in erase.outcome

    answered = alice_api.post(url, {"action": "erase_from_disk"})
    assert answered.status_code == 200, answered.text
    body = answered.json()["disk_erase"]
    assert (body["id"], body["state"], body["step"]) == (erase.pk, "complete", body["steps"])
    assert DiskErase.objects.count() == 1  # asking again queues nothing


@pytest.mark.django_db(transaction=True)
def test_an_erase_interrupted_midway_is_taken_up_by_the_daily_job():
    # Its worker died with the database (as a PANIC of the server does): still "running".
    stale = DiskErase.objects.create(
        via="page", state="running", started_at=timezone.now(), step=13, steps=14
    )

    summary = erase_uncovered_redactions()

    stale.refresh_from_db()
    assert stale.state == "complete", stale.outcome
    assert stale.finished_at is not None and summary == stale.outcome
