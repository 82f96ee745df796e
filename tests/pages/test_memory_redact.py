"""The redact page: it says exactly what will be erased, then erases it (no JavaScript)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories import redaction
from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.base import make_memory
from tests.pages.conftest import flashes

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(alice):
    first = Memory.remember(
        alice, "Therapist is Dr Okafor.", Memory.Type.SEMANTIC, entities=["Dr Okafor"]
    )
    second = first.supersede("Therapist is Dr Okafor, Tuesdays.", actor=alice, reason="day")
    first.refresh_from_db()
    return first, second


def redact_url(memory: Memory) -> str:
    return reverse("memory-redact", args=[memory.pk])


def test_it_says_what_will_be_erased_and_what_stays(alice_client, chain):
    first, second = chain

    response = alice_client.get(redact_url(second))

    assert response.status_code == 200
    body = response.content.decode()
    assert "Therapist is Dr Okafor, Tuesdays." in body
    assert "Dr Okafor</bdi>" in body  # its entities, by name
    assert "1 other version of its chain keeps its text" in body
    assert f"#{first.pk}</a>" in body and "Every version of its chain" in body
    assert "never recall it again" in body
    assert "What stays" in body
    assert "backups of its database" in body
    # Nothing was erased by looking.
    second.refresh_from_db()
    assert second.status == Memory.Status.ACTIVE


def test_it_redacts_this_version_after_confirmation(alice_client, alice, chain):
    first, second = chain

    response = alice_client.post(
        redact_url(second),
        {"confirmed": "yes", "scope": "version", "reason": "too personal"},
        follow=True,
    )

    second.refresh_from_db()
    first.refresh_from_db()
    assert (second.status, second.content) == (Memory.Status.REDACTED, REDACTED_CONTENT)
    assert first.content == "Therapist is Dr Okafor."
    assert flashes(response) == [f"Redacted memory #{second.pk}: the text is erased for good."]
    event = MemoryEvent.objects.get(memory=second, action=MemoryEvent.Action.REDACTED)
    assert (event.actor, event.via, event.reason) == (alice, "page", "too personal")
    body = response.content.decode()
    assert "Text erased" in body and "Redacted on" in body and "by <bdi>alice</bdi>" in body
    assert "Therapist is Dr Okafor, Tuesdays." not in body


def test_it_redacts_every_version_of_the_chain(alice_client, chain):
    first, second = chain

    response = alice_client.post(
        redact_url(second),
        {"confirmed": "yes", "scope": "chain", "reason": "too personal"},
        follow=True,
    )

    assert set(Memory.objects.values_list("content", flat=True)) == {REDACTED_CONTENT}
    assert flashes(response) == ["Redacted 2 versions: the text is erased for good."]
    body = response.content.decode()
    assert body.count("data-redacted-version") == 2
    assert "Okafor" not in body


def test_it_needs_a_reason_and_keeps_the_choice(alice_client, chain):
    _, second = chain

    response = alice_client.post(redact_url(second), {"confirmed": "yes", "scope": "chain"})

    assert response.status_code == 400
    assert "Give a reason: it is kept in the history." in response.content.decode()
    assert 'value="chain" checked' in response.content.decode()
    second.refresh_from_db()
    assert second.status == Memory.Status.ACTIVE


def test_it_refuses_a_reason_that_repeats_the_text(alice_client, chain):
    _, second = chain

    response = alice_client.post(
        redact_url(second), {"confirmed": "yes", "scope": "version", "reason": "dr okafor"}
    )

    assert response.status_code == 400
    assert "names an entity of the memory being erased" in response.content.decode()
    second.refresh_from_db()
    assert second.status == Memory.Status.ACTIVE


def test_a_post_without_confirmation_only_shows_the_page(alice_client, chain):
    _, second = chain

    response = alice_client.post(redact_url(second), {"reason": "too personal"})

    assert response.status_code == 200
    second.refresh_from_db()
    assert second.status == Memory.Status.ACTIVE


def test_another_owners_memory_is_a_404(alice_client, bob):
    bobs = make_memory(bob, "Bob's note.")

    assert alice_client.get(redact_url(bobs)).status_code == 404
    response = alice_client.post(
        redact_url(bobs), {"confirmed": "yes", "scope": "version", "reason": "x"}
    )
    assert response.status_code == 404
    bobs.refresh_from_db()
    assert bobs.status == Memory.Status.ACTIVE


def test_an_already_redacted_memory_says_so(alice_client, alice):
    memory = make_memory(alice, "Old note.")
    redaction.redact(memory, reason="private", actor=alice)

    response = alice_client.get(redact_url(memory))

    assert "Already redacted" in response.content.decode()
    again = alice_client.post(
        redact_url(memory), {"confirmed": "yes", "scope": "version", "reason": "again"}, follow=True
    )
    assert any("it is redacted" in message for message in flashes(again))


def test_the_detail_page_offers_redaction_for_every_status_but_redacted(alice_client, alice):
    for status in ("proposed", "active", "rejected", "archived"):
        memory = make_memory(alice, f"A {status} note.", status=status)
        body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
        assert redact_url(memory) in body, status
    redaction.redact(memory, reason="private", actor=alice)
    body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    assert redact_url(memory) not in body


def test_a_redacted_source_of_a_merge_shows_no_text(alice_client, alice):
    tea = make_memory(alice, "Drinks oolong tea.")
    coffee = make_memory(alice, "Drinks strong coffee.")
    merged = Memory.merge([tea, coffee], "Drinks tea and coffee.", actor=alice)
    redaction.redact(Memory.objects.get(pk=tea.pk), reason="private", actor=alice)

    body = alice_client.get(reverse("memory-detail", args=[merged.pk])).content.decode()

    assert "oolong" not in body
    assert "Drinks strong coffee." in body
    assert "Redacted: nothing to compare." in body
