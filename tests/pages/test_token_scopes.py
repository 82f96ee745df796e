"""The Tokens page: scopes chosen when creating, shown per token; pause and resume."""

from __future__ import annotations

from memories.models import ApiToken
from tests.pages.conftest import flashes


def test_it_creates_a_token_with_the_chosen_scopes_and_shows_them(alice_client, alice):
    response = alice_client.post(
        "/tokens/new/", {"name": "phone", "scopes": ["read", "propose"]}, follow=True
    )

    token = ApiToken.objects.get(owner=alice)
    assert token.scopes == ["read", "propose"]
    body = response.content.decode()
    assert '<td data-label="Scopes" data-token-scopes>read, propose</td>' in body


def test_the_form_offers_every_scope_ticked(alice_client):
    body = alice_client.get("/tokens/").content.decode()
    for scope in ("read", "propose", "write"):
        assert f'name="scopes" value="{scope}"' in body
    assert body.count("checked") >= 3


def test_it_refuses_a_token_with_no_scope(alice_client, alice):
    response = alice_client.post("/tokens/new/", {"name": "nothing"})

    assert response.status_code == 400
    assert "Pick at least one scope: read, propose or write." in flashes(response)
    assert not ApiToken.objects.filter(owner=alice).exists()


def test_it_pauses_and_resumes_a_token(alice_client, alice):
    token, raw = ApiToken.issue(alice, "laptop")

    response = alice_client.post(f"/tokens/{token.pk}/pause/", follow=True)
    token.refresh_from_db()
    assert token.is_paused
    assert "Paused the token “laptop”: it is refused until you resume it." in flashes(response)
    assert "Paused" in response.content.decode()
    assert 'aria-label="Resume laptop"' in response.content.decode()

    response = alice_client.post(f"/tokens/{token.pk}/resume/", follow=True)
    token.refresh_from_db()
    assert not token.is_paused
    assert "Resumed the token “laptop”: it works again." in flashes(response)


def test_another_owners_token_cannot_be_paused(alice_client, bob):
    token, _ = ApiToken.issue(bob, "bob's")
    assert alice_client.post(f"/tokens/{token.pk}/pause/").status_code == 404
    assert alice_client.post(f"/tokens/{token.pk}/resume/").status_code == 404
    token.refresh_from_db()
    assert not token.is_paused


def test_pause_needs_a_post(alice_client, alice):
    token, _ = ApiToken.issue(alice, "laptop")
    assert alice_client.get(f"/tokens/{token.pk}/pause/").status_code == 405
