from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import MAX_REASON_CHARS, Memory
from tests.base import make_memory
from tests.pages.conftest import flashes


def propose(owner, content: str, **kwargs) -> Memory:
    kwargs.setdefault("type", Memory.Type.SEMANTIC)
    return Memory.propose(owner, content, **kwargs)


@pytest.mark.django_db
def test_it_lists_proposals_oldest_first_with_provenance(alice_client, alice, bob):
    newer = propose(alice, "Alice moved to Lisbon.", session_id="chat-42", confidence=0.6)
    older = propose(alice, "Alice owns a bicycle.", entities=["Alice"], source="extraction")
    Memory.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(days=3))
    make_memory(alice, "Alice is already confirmed.")
    propose(bob, "Bob's proposal stays his.")

    response = alice_client.get(reverse("queue"))

    assert response.status_code == 200
    assert [m.pk for m in response.context["proposals"]] == [older.pk, newer.pk]
    body = response.content.decode()
    assert "Alice moved to Lisbon." in body
    assert "chat-42" in body
    assert "Extraction from a conversation" in body
    assert "60% confident" in body
    assert "3\xa0days ago" in body
    assert "already confirmed" not in body
    assert "Bob" not in body


@pytest.mark.django_db
def test_it_shows_an_empty_state(alice_client):
    response = alice_client.get(reverse("queue"))
    assert b"All caught up" in response.content
    assert b"Confirm selected" not in response.content


@pytest.mark.django_db
def test_it_confirms(alice_client, alice):
    memory = propose(alice, "Alice is vegetarian.")
    response = alice_client.post(reverse("memory-confirm", args=[memory.pk]), follow=True)

    assert response.redirect_chain[0][0] == reverse("queue")
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert memory.last_confirmed_at is not None
    event = memory.events.last()
    assert (event.action, event.via, event.actor) == ("confirmed", "page", alice)
    assert flashes(response) == ["Confirmed “Alice is vegetarian.”"]


@pytest.mark.django_db
def test_it_goes_back_to_the_page_it_came_from(alice_client, alice):
    memory = propose(alice, "Alice is vegetarian.")
    detail = reverse("memory-detail", args=[memory.pk])
    response = alice_client.post(reverse("memory-confirm", args=[memory.pk]), {"next": detail})
    assert response["Location"] == detail


@pytest.mark.django_db
def test_it_ignores_a_next_address_on_another_site(alice_client, alice):
    memory = propose(alice, "Alice is vegetarian.")
    response = alice_client.post(
        reverse("memory-confirm", args=[memory.pk]), {"next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("queue")


@pytest.mark.django_db
def test_it_rejects_with_a_reason(alice_client, alice):
    memory = propose(alice, "Alice has a cat.")
    response = alice_client.post(
        reverse("memory-reject", args=[memory.pk]), {"reason": "No cat here"}, follow=True
    )
    memory.refresh_from_db()
    assert memory.status == Memory.Status.REJECTED
    event = memory.events.last()
    assert (event.action, event.reason, event.via) == ("rejected", "No cat here", "page")
    assert flashes(response) == ["Rejected “Alice has a cat.”"]


@pytest.mark.django_db
def test_it_refuses_an_overlong_reason(alice_client, alice):
    memory = propose(alice, "Alice has a cat.")
    response = alice_client.post(
        reverse("memory-reject", args=[memory.pk]),
        {"reason": "x" * (MAX_REASON_CHARS + 1)},
        follow=True,
    )
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED
    assert "too long" in flashes(response)[0]


@pytest.mark.django_db
def test_it_explains_an_illegal_transition(alice_client, alice):
    memory = make_memory(alice, "Alice is already active.")
    response = alice_client.post(reverse("memory-reject", args=[memory.pk]), follow=True)
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert flashes(response) == [f"Cannot reject memory {memory.pk}: it is active."]
    assert response.context["messages"]._loaded_messages[0].level_tag == "error"


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["memory-confirm", "memory-reject"])
def test_it_hides_another_owners_proposal(alice_client, bob, name):
    memory = propose(bob, "Bob's secret.")
    response = alice_client.post(reverse(name, args=[memory.pk]))
    assert response.status_code == 404
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["memory-confirm", "memory-reject"])
def test_it_rejects_get(alice_client, alice, name):
    memory = propose(alice, "Alice is vegetarian.")
    assert alice_client.get(reverse(name, args=[memory.pk])).status_code == 405
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED


@pytest.mark.django_db
def test_it_rejects_get_on_the_bulk_action(alice_client):
    assert alice_client.get(reverse("queue-bulk")).status_code == 405


@pytest.mark.django_db
def test_it_rejects_post_on_the_queue(alice_client):
    assert alice_client.post(reverse("queue")).status_code == 405


@pytest.mark.django_db
def test_it_needs_a_csrf_token(csrf_client, alice):
    memory = propose(alice, "Alice is vegetarian.")
    assert csrf_client.post(reverse("memory-confirm", args=[memory.pk])).status_code == 403
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED


@pytest.mark.django_db
def test_it_puts_a_csrf_token_in_every_form(alice_client, alice):
    propose(alice, "Alice is vegetarian.")
    body = alice_client.get(reverse("queue")).content.decode()
    assert (
        body.count('method="post"') == body.count('name="csrfmiddlewaretoken"') == 4
    )  # sign out, bulk, confirm, reject


@pytest.mark.django_db
def test_it_confirms_several_at_once(alice_client, alice):
    first, second, third = (propose(alice, f"Fact number {n}.") for n in range(3))
    response = alice_client.post(
        reverse("queue-bulk"),
        {"action": "confirm", "ids": [first.pk, third.pk], "reason": "checked"},
        follow=True,
    )
    statuses = {m.pk: m.status for m in Memory.objects.filter(owner=alice)}
    assert statuses == {first.pk: "active", second.pk: "proposed", third.pk: "active"}
    assert first.events.last().reason == "checked"
    assert flashes(response) == ["Confirmed 2 memories."]


@pytest.mark.django_db
def test_it_asks_before_rejecting_several_at_once(alice_client, alice):
    first, second = (propose(alice, f"Fact number {n}.") for n in range(2))
    data = {"action": "reject", "ids": [first.pk, second.pk], "reason": "noise"}

    asked = alice_client.post(reverse("queue-bulk"), data)

    assert asked.status_code == 200
    assert b"Reject 2 proposals?" in asked.content
    assert b"Fact number 0." in asked.content and b"Fact number 1." in asked.content
    assert b'name="confirmed" value="yes"' in asked.content
    assert b'value="noise"' in asked.content
    assert set(Memory.objects.filter(owner=alice).values_list("status", flat=True)) == {"proposed"}

    response = alice_client.post(reverse("queue-bulk"), data | {"confirmed": "yes"}, follow=True)

    assert set(Memory.objects.filter(owner=alice).values_list("status", flat=True)) == {"rejected"}
    assert flashes(response) == ["Rejected 2 memories."]
    # The next page offers to undo it.
    assert b"Rejected 2 memories." in response.content
    assert b'action="/queue/restore/"' in response.content


@pytest.mark.django_db
def test_it_reports_the_ones_a_bulk_action_could_not_change(alice_client, alice):
    waiting = propose(alice, "Still waiting.")
    done = propose(alice, "Already handled.")
    done.reject(actor=alice)
    response = alice_client.post(
        reverse("queue-bulk"), {"action": "confirm", "ids": [waiting.pk, done.pk]}, follow=True
    )
    assert flashes(response) == [
        "Confirmed 1 memory.",
        f"Cannot confirm memory {done.pk}: it is rejected.",
    ]


@pytest.mark.django_db
def test_it_refuses_a_bulk_action_on_another_owners_memory(alice_client, alice, bob):
    mine = propose(alice, "Mine.")
    theirs = propose(bob, "Bob's.")
    response = alice_client.post(
        reverse("queue-bulk"), {"action": "confirm", "ids": [mine.pk, theirs.pk]}
    )
    assert response.status_code == 404
    assert Memory.objects.get(pk=mine.pk).status == "proposed"
    assert Memory.objects.get(pk=theirs.pk).status == "proposed"


@pytest.mark.django_db
def test_it_asks_to_select_something(alice_client, alice):
    propose(alice, "Mine.")
    response = alice_client.post(reverse("queue-bulk"), {"action": "confirm"}, follow=True)
    assert flashes(response) == ["Select at least one memory."]


@pytest.mark.django_db
def test_it_refuses_an_unknown_bulk_action(alice_client, alice):
    memory = propose(alice, "Mine.")
    response = alice_client.post(
        reverse("queue-bulk"), {"action": "archive", "ids": [memory.pk]}, follow=True
    )
    assert "not one of the available choices" in flashes(response)[0]
    memory.refresh_from_db()
    assert memory.status == "proposed"


@pytest.mark.django_db
def test_it_refuses_ids_that_are_not_numbers(alice_client, alice):
    memory = propose(alice, "Mine.")
    response = alice_client.post(
        reverse("queue-bulk"), {"action": "confirm", "ids": [memory.pk, "1; drop"]}, follow=True
    )
    assert flashes(response) == ["Memory ids are whole numbers."]
    memory.refresh_from_db()
    assert memory.status == "proposed"
