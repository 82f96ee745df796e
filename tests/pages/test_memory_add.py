"""Adding a memory in the browser: remembered at once, as the API's mode remember."""

import pytest
from django.conf import settings
from django.urls import reverse

from memories.models import Memory, MemoryEvent
from tests.pages.conftest import flashes


def add(client, follow: bool = False, **data):
    payload = {"content": "Alice is allergic to peanuts.", "type": "semantic", **data}
    return client.post(reverse("memory-add"), payload, follow=follow)


@pytest.mark.django_db
def test_it_remembers_an_active_memory_at_once(alice_client, alice):
    response = add(alice_client, entities="peanuts, Alice, alice", next="/memories/")
    assert response.status_code == 302
    assert response["Location"] == "/memories/"
    memory = Memory.objects.get(owner=alice)
    assert (memory.content, memory.type, memory.status) == (
        "Alice is allergic to peanuts.",
        "semantic",
        "active",
    )
    assert memory.entity_refs == ["peanuts", "Alice"]
    assert (memory.confidence, memory.source) == (1.0, "remember")
    assert memory.last_confirmed_at is not None
    event = MemoryEvent.objects.get(memory=memory)
    assert (event.action, event.via, event.actor) == ("created", "page", alice)


@pytest.mark.django_db
def test_it_says_what_it_remembered_on_the_page_it_came_from(alice_client, alice):
    response = add(alice_client, next="/", follow=True)
    memory = Memory.objects.get(owner=alice)
    assert response.redirect_chain[-1][0] == "/"
    assert flashes(response) == [
        f"Remembered “Alice is allergic to peanuts.” (#{memory.pk}). It is active now."
    ]


@pytest.mark.django_db
def test_it_goes_to_the_list_when_next_is_not_one_of_ours(alice_client, alice):
    response = add(alice_client, next="https://evil.example/")
    assert response["Location"] == reverse("memory-list")


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"content": "   "}, "content", "This field is required."),
        ({"content": "x" * (settings.MAX_CONTENT_CHARS + 1)}, "content", "At most"),
        ({"type": "gossip"}, "type", "Select a valid choice."),
    ],
)
@pytest.mark.django_db
def test_it_shows_errors_on_its_form_and_keeps_what_was_typed(
    alice_client, alice, data, field, message
):
    response = add(alice_client, entities="Lisbon, Ana", next="/", **data)
    assert response.status_code == 400
    assert not Memory.objects.exists()
    assert message in " ".join(response.context["form"].errors[field])
    body = response.content.decode()
    assert "Nothing was saved" in body
    assert 'value="Lisbon, Ana"' in body
    assert 'name="next" value="/"' in body


@pytest.mark.django_db
def test_it_shows_an_empty_form(alice_client):
    response = alice_client.get(reverse("memory-add"))
    assert response.status_code == 200
    body = response.content.decode()
    assert '<option value="semantic">Fact (semantic)</option>' in body
    assert 'dir="auto"' in body


@pytest.mark.django_db
def test_it_needs_a_signed_in_owner(client):
    response = client.post(reverse("memory-add"), {"content": "x", "type": "semantic"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_it_needs_a_csrf_token(csrf_client):
    response = csrf_client.post(reverse("memory-add"), {"content": "x", "type": "semantic"})
    assert response.status_code == 403
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_it_rejects_other_methods(alice_client):
    assert alice_client.put(reverse("memory-add")).status_code == 405


@pytest.mark.django_db
def test_the_home_page_offers_it_too(alice_client):
    body = alice_client.get(reverse("home")).content.decode()
    assert f'action="{reverse("memory-add")}"' in body
    assert 'name="next" value="/"' in body
