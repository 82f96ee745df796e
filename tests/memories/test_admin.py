"""The admin shows everything, deletes nothing, and changes state only via the model."""

from __future__ import annotations

import pytest
from django.contrib.admin import helpers
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from memories.admin import memory_page_url
from memories.models import ApiToken, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db

CHANGELISTS = ["memories_memory", "memories_memoryevent", "memories_apitoken"]


def changelist(name: str) -> str:
    return reverse(f"admin:{name}_changelist")


def run_action(client, name: str, action: str, ids: list[int]):
    return client.post(
        changelist(name),
        {"action": action, helpers.ACTION_CHECKBOX_NAME: [str(pk) for pk in ids]},
        follow=True,
    )


@pytest.fixture
def history(alice, bob):
    lyon = make_memory(alice, "Alice lives in Lyon.", entities=["Lyon"])
    paris = lyon.supersede("Alice lives in Paris.")
    proposal = Memory.propose(bob, "Bob likes sailing.", Memory.Type.PREFERENCE)
    token, secret = ApiToken.issue(alice, "laptop")
    lyon.refresh_from_db()
    return lyon, paris, proposal, token, secret


@pytest.mark.parametrize("name", CHANGELISTS)
def test_it_lists_filters_and_searches_every_model(admin_client, history, name):
    assert admin_client.get(changelist(name)).status_code == 200
    assert admin_client.get(changelist(name), {"q": "alice"}).status_code == 200


def test_it_filters_memories_by_status_type_owner_and_source(admin_client, history, alice):
    lyon, paris, proposal, _, _ = history
    url = changelist("memories_memory")

    by_status = admin_client.get(url, {"status__exact": "proposed"})
    by_owner = admin_client.get(url, {"owner__id__exact": alice.pk})
    by_type = admin_client.get(url, {"type__exact": "preference"})
    by_source = admin_client.get(url, {"source__exact": "api"})
    by_text = admin_client.get(url, {"q": "Paris"})

    assert list(by_status.context["cl"].result_list) == [proposal]
    assert set(by_owner.context["cl"].result_list) == {lyon, paris}
    assert list(by_type.context["cl"].result_list) == [proposal]
    assert by_source.context["cl"].result_count == 3
    assert list(by_text.context["cl"].result_list) == [paris]


def test_it_links_each_memory_to_its_chain_page(admin_client, history):
    lyon, paris, _, _, _ = history

    page = admin_client.get(changelist("memories_memory")).content.decode()

    assert memory_page_url(lyon.pk) == f"/memories/{lyon.pk}/"
    assert f'href="/memories/{lyon.pk}/"' in page
    assert f'href="/memories/{paris.pk}/"' in page


def test_it_shows_the_chain_and_events_on_a_memorys_page(admin_client, history):
    lyon, paris, _, _, _ = history

    page = admin_client.get(reverse("admin:memories_memory_change", args=[paris.pk]))

    text = page.content.decode()
    assert page.status_code == 200
    assert text.index(f"#{lyon.pk}</a> [superseded]") < text.index(f"#{paris.pk}</a> [active]")
    assert "(this one)" in text
    assert "New version" in text  # the event log of this version
    assert 'name="_save"' not in text


def test_it_offers_no_delete_anywhere(admin_client, history):
    lyon, _, _, token, _ = history
    event = MemoryEvent.objects.filter(memory=lyon).first()
    targets = [
        ("memories_memory", lyon.pk),
        ("memories_memoryevent", event.pk),
        ("memories_apitoken", token.pk),
    ]

    for name, pk in targets:
        listing = admin_client.get(changelist(name))
        assert "delete_selected" not in listing.content.decode()
        assert admin_client.get(reverse(f"admin:{name}_delete", args=[pk])).status_code == 403
        assert admin_client.post(reverse(f"admin:{name}_delete", args=[pk])).status_code == 403
        run_action(admin_client, name, "delete_selected", [pk])

    assert Memory.objects.filter(pk=lyon.pk).exists()
    assert MemoryEvent.objects.filter(pk=event.pk).exists()
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_it_refuses_to_add_or_edit_in_place(admin_client, history):
    lyon, _, _, token, _ = history
    event = MemoryEvent.objects.filter(memory=lyon).first()

    for name, pk in [
        ("memories_memory", lyon.pk),
        ("memories_memoryevent", event.pk),
        ("memories_apitoken", token.pk),
    ]:
        assert admin_client.get(reverse(f"admin:{name}_add")).status_code == 403
        edit = admin_client.post(
            reverse(f"admin:{name}_change", args=[pk]), {"content": "Rewritten", "reason": "x"}
        )
        assert edit.status_code == 403

    lyon.refresh_from_db()
    assert lyon.content == "Alice lives in Lyon."
    assert MemoryEvent.objects.get(pk=event.pk).reason == ""


def test_it_changes_state_through_the_model_methods(admin_client, history, admin_user):
    lyon, paris, proposal, _, _ = history
    listing = admin_client.get(changelist("memories_memory")).content.decode()
    assert "confirm_memories" in listing

    run_action(admin_client, "memories_memory", "confirm_memories", [proposal.pk])
    response = run_action(admin_client, "memories_memory", "archive_memories", [lyon.pk, paris.pk])

    proposal.refresh_from_db()
    paris.refresh_from_db()
    assert proposal.status == Memory.Status.ACTIVE
    assert paris.status == Memory.Status.ARCHIVED
    confirmed = MemoryEvent.objects.filter(memory=proposal).last()
    assert (confirmed.action, confirmed.actor, confirmed.via) == ("confirmed", admin_user, "admin")
    warnings = [str(m) for m in response.context["messages"]]
    assert any(f"the head of its chain is memory {paris.pk}" in m for m in warnings)
    assert Memory.objects.get(pk=lyon.pk).status == Memory.Status.SUPERSEDED


def test_it_never_shows_a_token_secret_or_digest(admin_client, history):
    _, _, _, token, secret = history

    pages = [
        admin_client.get(changelist("memories_apitoken")),
        admin_client.get(reverse("admin:memories_apitoken_change", args=[token.pk])),
    ]

    for page in pages:
        text = page.content.decode()
        assert f"{token.prefix}…" in text
        assert secret not in text
        assert token.digest not in text


def test_it_revokes_tokens(admin_client, history):
    _, _, _, token, secret = history
    other, other_secret = ApiToken.issue(token.owner)

    response = run_action(admin_client, "memories_apitoken", "revoke_tokens", [token.pk])

    assert ApiToken.authenticate(secret) is None
    assert ApiToken.authenticate(other_secret) == other
    assert "Revoked 1 tokens." in [str(m) for m in response.context["messages"]]
    revoked = admin_client.get(changelist("memories_apitoken"), {"revoked_at__isempty": "0"})
    assert list(revoked.context["cl"].result_list) == [token]


def test_it_keeps_state_changes_from_staff_without_change_permission(client, history):
    _, _, proposal, token, secret = history
    viewer = get_user_model().objects.create_user("viewer", password="viewer-pw-1", is_staff=True)
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_memory", "view_apitoken"])
    )
    client.force_login(viewer)
    listing = client.get(changelist("memories_memory"))
    assert listing.status_code == 200
    assert "confirm_memories" not in listing.content.decode()

    run_action(client, "memories_memory", "confirm_memories", [proposal.pk])
    run_action(client, "memories_apitoken", "revoke_tokens", [token.pk])

    proposal.refresh_from_db()
    assert proposal.status == Memory.Status.PROPOSED
    assert ApiToken.authenticate(secret) is not None
