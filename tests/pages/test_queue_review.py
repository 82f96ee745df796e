"""The queue beside what each proposal repeats or updates; decisions that can be undone."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import Memory, MemoryEvent
from tests.base import make_memory
from tests.pages.conftest import flashes

pytestmark = pytest.mark.django_db


def propose(owner, content: str, **kwargs) -> Memory:
    kwargs.setdefault("type", Memory.Type.PREFERENCE)
    return Memory.propose(owner, content, **kwargs)


def test_it_shows_each_proposal_beside_what_it_repeats_or_updates(alice_client, alice, bob):
    aisle = make_memory(alice, "Prefers an aisle seat on long flights.")
    leila = make_memory(alice, "His wife's name is Leila.", entities=["Leila"])
    make_memory(bob, "Prefers a window seat on long flights.")
    window = propose(alice, "Prefers a window seat on long flights.")
    again = propose(alice, "His wife's name is Leila", entities=["Leila"])
    alone = propose(alice, "Is allergic to peanuts.")

    response = alice_client.get(reverse("queue"))

    items = {item.memory.pk: item for item in response.context["items"]}
    assert [(r.memory, r.relation) for r in items[window.pk].related] == [(aisle, "update")]
    assert [(r.memory, r.relation) for r in items[again.pk].related] == [(leila, "duplicate")]
    assert items[alone.pk].related == []
    body = response.content.decode()
    assert "Possible update" in body and "Likely duplicate" in body
    assert "Prefers <del>an</del><ins>a</ins> <del>aisle</del><ins>window</ins> seat" in body
    assert f"Confirm as new version of #{aisle.pk}" in body
    assert f"Reject as duplicate of #{leila.pk}" in body
    assert body.count("Confirm alongside") == 2
    assert "Compared by entities and words only (no embedding provider)" in body


def test_it_confirms_a_proposal_as_a_new_version(alice_client, alice):
    aisle = make_memory(alice, "Prefers an aisle seat.")
    window = propose(alice, "Prefers a window seat.")

    response = alice_client.post(
        reverse("memory-confirm", args=[window.pk]), {"replaces": aisle.pk}, follow=True
    )

    aisle.refresh_from_db()
    window.refresh_from_db()
    assert window.status == "active"
    assert (aisle.status, aisle.superseded_by_id) == ("superseded", window.pk)
    assert flashes(response) == [
        f"Confirmed “Prefers a window seat.” as the new version of #{aisle.pk}"
    ]
    event = window.events.get(action="confirmed")
    assert (event.via, event.actor, event.data["replaces"]) == ("page", alice, aisle.pk)


def test_it_says_when_the_memory_to_replace_has_changed_meanwhile(alice_client, alice):
    aisle = make_memory(alice, "Prefers an aisle seat.")
    head = aisle.supersede("Prefers an aisle seat at the front.")
    window = propose(alice, "Prefers a window seat.")

    response = alice_client.post(
        reverse("memory-confirm", args=[window.pk]), {"replaces": aisle.pk}, follow=True
    )

    assert flashes(response) == [
        f"Cannot replace memory {aisle.pk}: it is superseded; the head of its chain is "
        f"memory {head.pk} (only an active memory is replaced)."
    ]
    window.refresh_from_db()
    assert window.status == "proposed"


def test_it_never_replaces_another_owners_memory(alice_client, alice, bob):
    bobs = make_memory(bob, "Prefers an aisle seat.")
    window = propose(alice, "Prefers a window seat.")
    for field in ("replaces", "duplicate_of"):
        url = "memory-confirm" if field == "replaces" else "memory-reject"
        response = alice_client.post(reverse(url, args=[window.pk]), {field: bobs.pk})
        assert response.status_code == 404
        response = alice_client.post(reverse(url, args=[window.pk]), {field: "x1"})
        assert response.status_code == 404
    window.refresh_from_db()
    bobs.refresh_from_db()
    assert (window.status, bobs.status) == ("proposed", "active")


def test_it_rejects_as_a_duplicate_and_names_it(alice_client, alice):
    leila = make_memory(alice, "His wife's name is Leila.")
    again = propose(alice, "His wife's name is Leila")

    response = alice_client.post(
        reverse("memory-reject", args=[again.pk]), {"duplicate_of": leila.pk}, follow=True
    )

    again.refresh_from_db()
    assert again.status == "rejected"
    assert again.events.get(action="rejected").reason == (
        f"Duplicate of memory {leila.pk} “His wife's name is Leila.”"
    )
    assert flashes(response) == [
        f"Rejected “His wife's name is Leila” as a duplicate of #{leila.pk}"
    ]
    assert response.context["undo"] == [again]


def test_it_undoes_a_rejection_from_the_queue(alice_client, alice):
    memory = propose(alice, "Has a cat named Miso.")
    alice_client.post(reverse("memory-reject", args=[memory.pk]), {"reason": "no cat"})

    queue = alice_client.get(reverse("queue"))
    assert b"Undo" in queue.content
    assert [m.pk for m in queue.context["recently_rejected"]] == [memory.pk]
    # Offered once: the next page no longer shows it.
    assert alice_client.get(reverse("queue")).context["undo"] == []

    response = alice_client.post(reverse("queue-restore"), {"ids": [memory.pk]}, follow=True)

    memory.refresh_from_db()
    assert memory.status == "proposed"
    assert flashes(response) == ["Restored “Has a cat named Miso.” to the queue."]
    assert [e.action for e in memory.events.order_by("id")] == ["proposed", "rejected", "restored"]
    assert memory.events.last().via == "page"
    assert response.context["recently_rejected"] == []


def test_it_restores_from_the_memory_page(alice_client, alice):
    memory = propose(alice, "Has a cat named Miso.")
    memory.reject()
    detail = reverse("memory-detail", args=[memory.pk])
    assert b"Restore to the queue" in alice_client.get(detail).content

    response = alice_client.post(reverse("queue-restore"), {"ids": [memory.pk], "next": detail})

    assert response["Location"] == detail
    memory.refresh_from_db()
    assert memory.status == "proposed"


def test_it_refuses_to_restore_what_was_not_rejected(alice_client, alice, bob):
    active = make_memory(alice, "Prefers an aisle seat.")
    bobs = make_memory(bob, "Bob's rejected fact.", status=Memory.Status.REJECTED)

    response = alice_client.post(reverse("queue-restore"), {"ids": [active.pk]}, follow=True)
    assert flashes(response) == [f"Cannot restore memory {active.pk}: it is active."]
    assert alice_client.post(reverse("queue-restore"), {"ids": [bobs.pk]}).status_code == 404
    assert alice_client.get(reverse("queue-restore")).status_code == 405
    bobs.refresh_from_db()
    assert bobs.status == "rejected"


def test_it_returns_to_the_queue_after_edit_then_confirm(alice_client, alice):
    proposal = propose(alice, "Prefers aisle seats.", confidence=0.55, source="extraction")
    propose(alice, "Is allergic to peanuts.")
    queue = reverse("queue")
    edit = reverse("memory-edit", args=[proposal.pk]) + "?next=" + queue
    page = alice_client.get(edit)
    assert f'name="next" value="{queue}"'.encode() in page.content

    response = alice_client.post(
        edit,
        {"content": "Prefers window seats.", "type": "preference", "entities": "", "next": queue},
    )

    assert response["Location"] == queue
    new = Memory.objects.get(pk=Memory.objects.get(pk=proposal.pk).superseded_by_id)
    assert (new.content, new.confidence, new.source) == ("Prefers window seats.", 1.0, "page")
    actions = list(MemoryEvent.objects.filter(memory=new).values_list("action", flat=True))
    assert actions == ["version", "confirmed"]


def test_it_says_when_related_memories_could_not_be_looked_up(alice_client, alice, monkeypatch):
    from django.db import DatabaseError

    from memories import related

    def broken(*args, **kwargs):
        raise DatabaseError("statement timeout")

    make_memory(alice, "Prefers an aisle seat.")
    propose(alice, "Prefers a window seat.")
    monkeypatch.setattr(related, "_candidates", broken)

    response = alice_client.get(reverse("queue"))

    assert response.status_code == 200
    assert b"Could not look for related memories in time" in response.content
    assert b"Prefers a window seat." in response.content
