import pytest
from django.urls import reverse

from memories.models import Memory
from tests.base import make_memory


@pytest.mark.django_db
def test_it_counts_memories_by_status_and_type(alice_client, alice, bob):
    make_memory(alice, type="semantic")
    make_memory(alice, type="semantic")
    make_memory(alice, type="preference", status="archived")
    Memory.propose(alice, "Alice might like jazz.", "preference")
    make_memory(bob, type="semantic")
    Memory.propose(bob, "Bob's proposal.", "semantic")

    response = alice_client.get(reverse("home"))

    assert response.status_code == 200
    assert response.context["total"] == 4
    assert response.context["waiting"] == 1
    semantic = next(row for row in response.context["by_type"] if row["value"] == "semantic")
    assert semantic["total"] == 2
    statuses = {row["value"]: row["count"] for row in response.context["status_totals"]}
    assert statuses == {
        "proposed": 1,
        "active": 2,
        "rejected": 0,
        "superseded": 0,
        "archived": 1,
        "redacted": 0,
    }
    assert b"waiting in the queue" in response.content


@pytest.mark.django_db
def test_it_lists_the_latest_events_with_links(alice_client, alice, bob):
    memory = Memory.propose(alice, "Alice plays the cello.", "semantic")
    memory.confirm(actor=alice, via="page")
    new = memory.supersede("Alice plays the viola.", actor=alice, via="page")
    Memory.propose(bob, "Bob secret.", "semantic").confirm(actor=bob)

    response = alice_client.get(reverse("home"))

    actions = [event.action for event in response.context["events"]]
    assert actions == ["version", "superseded", "confirmed"]
    assert reverse("memory-detail", args=[new.pk]).encode() in response.content
    assert b"Bob secret" not in response.content


@pytest.mark.django_db
def test_it_shows_an_empty_state(alice_client):
    response = alice_client.get(reverse("home"))
    assert b"Nothing has happened yet" in response.content
    assert b"All caught up" in response.content


@pytest.mark.django_db
def test_it_rejects_post(alice_client):
    assert alice_client.post(reverse("home")).status_code == 405


@pytest.mark.django_db
def test_it_names_types_both_ways_and_channels_consistently(alice_client, alice):
    memory = Memory.propose(alice, "Alice plays the cello.", "semantic")
    memory.confirm(actor=alice, via="api")
    body = alice_client.get(reverse("home")).content.decode()
    assert ">Fact (semantic)</a>" in body and ">Event (episodic)</a>" in body
    assert "via API by alice" in body
    assert "“<bdi>Alice plays the cello.</bdi>”" in body
