"""The admin's redact action: an intermediate page first, then the model method."""

from __future__ import annotations

import pytest
from django.contrib.admin import helpers
from django.urls import reverse

from memories import redaction
from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:memories_memory_changelist")


def post_action(client, ids: list[int], **extra):
    data = {"action": "redact_memories", helpers.ACTION_CHECKBOX_NAME: [str(pk) for pk in ids]}
    return client.post(CHANGELIST, {**data, **extra}, follow=True)


@pytest.fixture
def chain(alice):
    first = make_memory(alice, "Ex-partner's address is 5 Elm Road.", entities=["Elm Road"])
    second = first.supersede("Ex-partner's address is 9 Oak Lane.", reason="moved")
    first.refresh_from_db()
    return first, second


def test_it_asks_first_and_says_what_will_be_erased(admin_client, chain):
    first, second = chain

    response = post_action(admin_client, [second.pk])

    assert response.status_code == 200
    assert response.templates[0].name == "admin/memories/memory/redact_confirmation.html"
    body = response.content.decode()
    assert "Ex-partner&#x27;s address is 9 Oak Lane." in body
    assert "its chain has 2 versions" in body
    assert "Backups, exports already downloaded" in body
    second.refresh_from_db()
    assert second.status == Memory.Status.ACTIVE


def test_it_redacts_after_confirmation(admin_client, admin_user, chain):
    first, second = chain

    response = post_action(
        admin_client, [second.pk], redact_confirmed="yes", scope="chain", reason="court order"
    )

    assert response.status_code == 200
    assert "Redacted 2 memory versions" in response.content.decode()
    assert set(Memory.objects.values_list("status", "content")) == {
        (Memory.Status.REDACTED, REDACTED_CONTENT)
    }
    event = MemoryEvent.objects.get(memory=second, action=MemoryEvent.Action.REDACTED)
    assert (event.actor, event.via, event.reason) == (admin_user, "admin", "court order")


def test_it_needs_a_reason(admin_client, chain):
    _, second = chain

    response = post_action(admin_client, [second.pk], redact_confirmed="yes", scope="version")

    assert "Give a reason" in response.content.decode()
    second.refresh_from_db()
    assert second.status == Memory.Status.ACTIVE


def test_it_reports_memories_already_redacted(admin_client, alice, chain):
    first, second = chain
    redaction.redact(first, reason="private", actor=alice)

    response = post_action(
        admin_client,
        [first.pk, second.pk],
        redact_confirmed="yes",
        scope="version",
        reason="clean up",
    )

    body = response.content.decode()
    assert "Redacted 1 memory versions" in body
    assert "it is redacted" in body
    second.refresh_from_db()
    assert second.status == Memory.Status.REDACTED
