"""The owner walk through the pages (no JavaScript): feedback where the owner
acts, the owner's source and confidence, the list's status tabs, archive and
its Undo, and a redaction that offers the other memories holding the same text."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from memories import redaction
from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.base import make_memory
from tests.pages.conftest import flashes

pytestmark = pytest.mark.django_db


def propose(owner, content: str) -> Memory:
    return Memory.propose(owner, content, Memory.Type.SEMANTIC, confidence=0.6)


# --- feedback where the owner acts ------------------------------------------------


def test_a_queue_action_goes_back_to_the_proposal_that_followed(alice_client, alice):
    first, second, third = (propose(alice, f"Alice fact {n} holds") for n in range(3))
    queue = reverse("queue")

    response = alice_client.post(reverse("memory-reject", args=[second.pk]), {"next": queue})
    assert response["Location"] == f"{queue}#proposal-{third.pk}"

    response = alice_client.post(reverse("memory-confirm", args=[third.pk]), {"next": queue})
    # The last one settled: back at the one before it.
    assert response["Location"] == f"{queue}#proposal-{first.pk}"


def test_the_undo_of_a_rejection_is_in_the_toast_region_without_a_double_period(
    alice_client, alice
):
    memory = propose(alice, "Alice has a cat.")
    alice_client.post(reverse("memory-reject", args=[memory.pk]))
    body = alice_client.get(reverse("queue")).content.decode()

    toasts = body.split("data-toasts>", 1)[1].split('<div class="page-head">', 1)[0]
    assert "data-undo" in toasts
    assert "Rejected “Alice has a cat.”" in toasts
    assert ".." not in toasts


# --- the owner's source and confidence -------------------------------------------


def test_edit_then_confirm_carries_the_owners_confidence_and_source(alice_client, alice):
    proposal = propose(alice, "Prefers aisle seats.")
    alice_client.post(
        reverse("memory-edit", args=[proposal.pk]),
        {"content": "Prefers window seats.", "type": "preference", "entities": ""},
    )
    new = Memory.objects.get(content="Prefers window seats.")
    assert (new.status, new.confidence, new.source) == ("active", 1.0, "page")
    page = alice_client.get(reverse("memory-detail", args=[new.pk])).content.decode()
    assert "Written or confirmed by the owner on the pages" in page


def test_a_confirm_on_the_pages_takes_the_owners_confidence_and_source(alice_client, alice):
    proposal = propose(alice, "Prefers aisle seats.")
    alice_client.post(reverse("memory-confirm", args=[proposal.pk]))
    proposal.refresh_from_db()
    assert (proposal.status, proposal.confidence, proposal.source) == ("active", 1.0, "page")
    event = proposal.events.last()
    assert (event.data["proposed_confidence"], event.data["proposed_source"]) == (0.6, "api")

    # So does a bulk confirm, and a confirm as the new version of an active memory.
    several = [propose(alice, f"Alice fact {n} holds") for n in range(2)]
    alice_client.post(reverse("queue-bulk"), {"action": "confirm", "ids": [m.pk for m in several]})
    old = make_memory(alice, "Lives in Porto.")
    update = propose(alice, "Lives in Lisbon.")
    alice_client.post(reverse("memory-confirm", args=[update.pk]), {"replaces": old.pk})
    for memory in [*several, update]:
        memory.refresh_from_db()
        assert (memory.status, memory.confidence, memory.source) == ("active", 1.0, "page")


def test_a_confirm_through_the_api_keeps_the_proposals_fields(alice):
    proposal = propose(alice, "Prefers aisle seats.")
    proposal.confirm(actor=alice, via="api")
    proposal.refresh_from_db()
    assert (proposal.status, proposal.confidence, proposal.source) == ("active", 0.6, "api")


def test_an_edit_of_an_active_memory_is_the_owners_and_no_edit_writes_nothing(alice_client, alice):
    memory = make_memory(alice, "Lives in Porto.", confidence=0.7)
    url = reverse("memory-edit", args=[memory.pk])
    alice_client.post(url, {"content": "Lives in Porto.", "type": "semantic", "entities": ""})
    memory.refresh_from_db()
    assert (memory.status, memory.superseded_by_id) == ("active", None)

    alice_client.post(url, {"content": "Lives in Lisbon.", "type": "semantic", "entities": ""})
    new = Memory.objects.get(content="Lives in Lisbon.")
    assert (new.confidence, new.source) == (1.0, "page")


# --- the list: status tabs, active by default -------------------------------------


def test_the_list_opens_on_the_active_memories_with_a_tab_per_status(alice_client, alice, bob):
    active = make_memory(alice, "Alice cycles to work.")
    proposal = propose(alice, "Alice may like jazz.")
    rejected = propose(alice, "Alice hates tea.")
    rejected.reject(actor=alice)
    make_memory(bob, "Bob's memory stays his.")

    response = alice_client.get(reverse("memory-list"))
    assert [m.pk for m in response.context["memories"]] == [active.pk]
    tabs = {tab["status"]: (tab["count"], tab["current"]) for tab in response.context["tabs"]}
    assert tabs["active"] == (1, True)
    assert tabs["proposed"] == (1, False)
    assert tabs["rejected"] == (1, False)
    assert tabs["all"] == (3, False)
    assert b'class="table memories-table compact"' in response.content

    response = alice_client.get(reverse("memory-list"), {"status": "proposed"})
    assert [m.pk for m in response.context["memories"]] == [proposal.pk]
    response = alice_client.get(reverse("memory-list"), {"status": "all"})
    assert len(response.context["memories"]) == 3
    # A search keeps its tab and counts what it matches.
    response = alice_client.get(reverse("memory-list"), {"status": "all", "q": "jazz"})
    assert [m.pk for m in response.context["memories"]] == [proposal.pk]
    assert {t["status"]: t["count"] for t in response.context["tabs"]}["active"] == 0


# --- archive with a reason, and its Undo ------------------------------------------


def test_an_archive_takes_a_reason_and_can_be_undone(alice_client, alice):
    memory = make_memory(alice, "Alice cycles to work.")
    response = alice_client.post(
        reverse("memory-archive", args=[memory.pk]),
        {"confirmed": "yes", "reason": "sold the bike"},
        follow=True,
    )
    memory.refresh_from_db()
    assert memory.status == "archived"
    assert memory.events.last().reason == "sold the bike"
    body = response.content.decode()
    assert reverse("memory-unarchive", args=[memory.pk]) in body
    assert "data-undo-archive" in body

    response = alice_client.post(reverse("memory-unarchive", args=[memory.pk]), follow=True)
    memory.refresh_from_db()
    assert (memory.status, memory.active_until) == ("active", None)
    event = memory.events.last()
    assert (event.action, event.via, event.data["from"]) == ("unarchived", "page", "archived")
    assert flashes(response) == ["“Alice cycles to work.” is active again"]


def test_an_archive_without_a_reason(alice_client, alice):
    memory = make_memory(alice, "Alice cycles to work.")
    alice_client.post(reverse("memory-archive", args=[memory.pk]), {"confirmed": "yes"})
    memory.refresh_from_db()
    assert (memory.status, memory.events.last().reason) == ("archived", "")


def test_only_an_archived_memory_of_ones_own_is_unarchived(alice_client, alice, bob):
    active = make_memory(alice, "Alice cycles to work.")
    response = alice_client.post(reverse("memory-unarchive", args=[active.pk]), follow=True)
    assert "cannot" in flashes(response)[0].lower() or "only" in flashes(response)[0].lower()
    theirs = make_memory(bob, "Bob's memory.")
    theirs.archive(actor=bob)
    assert alice_client.post(reverse("memory-unarchive", args=[theirs.pk])).status_code == 404
    assert alice_client.get(reverse("memory-unarchive", args=[active.pk])).status_code == 405


def test_the_database_allows_archived_to_active_and_nothing_else_new(alice):
    memory = make_memory(alice, "Alice cycles to work.")
    memory.archive(actor=alice)
    with connection.cursor() as cursor:
        with pytest.raises(IntegrityError), transaction.atomic():
            cursor.execute(
                "UPDATE memories_memory SET status = 'proposed' WHERE id = %s", [memory.pk]
            )
        cursor.execute("UPDATE memories_memory SET status = 'active' WHERE id = %s", [memory.pk])
    memory.refresh_from_db()
    assert memory.status == "active"


# --- redact: the other memories that hold the same text ---------------------------


def test_the_redact_page_offers_the_other_memories_with_the_same_text(alice_client, alice, bob):
    secret = make_memory(alice, "Alice's PIN is 4417")
    rejected = propose(alice, "alice's pin is 4417")
    rejected.reject(actor=alice)
    longer = propose(alice, "Note: Alice's PIN is 4417 at the bank")
    unrelated = propose(alice, "Alice's PIN is something else")
    gone = propose(alice, "Alice's PIN is 4417")
    redaction.redact(gone, reason="earlier", actor=alice)
    theirs = make_memory(bob, "Alice's PIN is 4417")

    response = alice_client.get(reverse("memory-redact", args=[secret.pk]))
    offered = {m.pk for m in response.context["copies"]}
    assert offered == {rejected.pk, longer.pk}
    assert unrelated.pk not in offered and theirs.pk not in offered and gone.pk not in offered
    assert f'name="also" value="{rejected.pk}" checked'.encode() in response.content
    assert f'name="also" value="{longer.pk}">'.encode() in response.content  # not ticked

    # Bob's id sent anyway is ignored: only what the page offered is redacted.
    response = alice_client.post(
        reverse("memory-redact", args=[secret.pk]),
        {
            "confirmed": "yes",
            "scope": "version",
            "reason": "a PIN, by mistake",
            "also": [str(rejected.pk), str(theirs.pk)],
        },
        follow=True,
    )
    status = dict(Memory.objects.values_list("pk", "status"))
    assert status[secret.pk] == status[rejected.pk] == "redacted"
    assert Memory.objects.get(pk=rejected.pk).content == REDACTED_CONTENT
    assert status[longer.pk] == "proposed"
    assert status[theirs.pk] == "active"
    assert flashes(response) == [
        f"Redacted memory #{secret.pk} and #{rejected.pk}: the text is erased for good."
    ]
    event = MemoryEvent.objects.get(memory=rejected, action="redacted")
    assert (event.reason, event.via) == ("a PIN, by mistake", "page")


def test_redacting_a_confirmed_proposal_of_extraction_forgets_its_conversation(alice_client, alice):
    """Confirmed on the pages it has source page; its conversation is still found."""
    from uuid import uuid4

    from django.utils import timezone
    from django_q.models import Task

    from memories.redaction import EXTRACTION_TASK

    proposal = Memory.propose(
        alice, "Alice's PIN is 4417", Memory.Type.SEMANTIC, source="extraction", session_id="c-1"
    )
    now = timezone.now()
    Task.objects.create(
        id=uuid4().hex,
        name="run",
        func=EXTRACTION_TASK,
        args=(alice.pk, "c-1", "turn_end", [{"role": "user", "content": "PIN 4417"}]),
        started=now,
        stopped=now,
        success=True,
    )
    alice_client.post(reverse("memory-confirm", args=[proposal.pk]))
    proposal.refresh_from_db()
    assert proposal.source == "page"
    page = alice_client.get(reverse("memory-redact", args=[proposal.pk]))
    assert b"The record of the extraction run that proposed it" in page.content

    alice_client.post(
        reverse("memory-redact", args=[proposal.pk]),
        {"confirmed": "yes", "scope": "version", "reason": "a PIN"},
    )
    assert Memory.objects.get(pk=proposal.pk).status == "redacted"
    assert not Task.objects.filter(func=EXTRACTION_TASK).exists()
