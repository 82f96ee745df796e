import pytest
from django.urls import reverse

from memories.models import ApiToken
from tests.pages.conftest import flashes


@pytest.mark.django_db
def test_it_creates_a_token_and_shows_it_once(alice_client, alice):
    response = alice_client.post(
        reverse("token-create"),
        {"name": "laptop", "scopes": ["read", "propose", "write"]},
        follow=True,
    )

    token = ApiToken.objects.get(owner=alice)
    raw = response.context["new_token"]["raw"]
    assert token.name == "laptop"
    assert ApiToken.authenticate(raw) == token
    assert raw.encode() in response.content
    assert b"shown only this once" in response.content
    assert flashes(response) == ["Created the token “laptop”. Copy it now."]

    again = alice_client.get(reverse("tokens"))
    assert again.context["new_token"] is None
    assert raw.encode() not in again.content
    assert token.prefix.encode() in again.content


@pytest.mark.django_db
def test_it_lists_only_the_owners_tokens_with_last_use(alice_client, alice, bob):
    used, raw = ApiToken.issue(alice, "assistant")
    ApiToken.authenticate(raw)
    ApiToken.issue(alice, "spare")
    ApiToken.issue(bob, "bob-token")

    response = alice_client.get(reverse("tokens"))

    assert [t.name for t in response.context["tokens"]] == ["spare", "assistant"]
    body = response.content.decode()
    assert "never used" in body
    assert "just now" in body
    assert "bob-token" not in body


@pytest.mark.django_db
def test_it_needs_a_name(alice_client, alice):
    response = alice_client.post(reverse("token-create"), {"name": "  "})
    assert response.status_code == 400
    assert b"This field is required." in response.content
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_it_revokes(alice_client, alice):
    token, raw = ApiToken.issue(alice, "old laptop")
    response = alice_client.post(reverse("token-revoke", args=[token.pk]), follow=True)
    token.refresh_from_db()
    assert token.is_revoked
    assert ApiToken.authenticate(raw) is None
    assert flashes(response) == ["Revoked the token “old laptop”. It no longer works."]
    assert b"Revoked" in response.content


@pytest.mark.django_db
def test_it_says_when_a_token_was_already_revoked(alice_client, alice):
    token, _ = ApiToken.issue(alice, "old laptop")
    token.revoke()
    response = alice_client.post(reverse("token-revoke", args=[token.pk]), follow=True)
    assert flashes(response) == ["The token “old laptop” was already revoked."]


@pytest.mark.django_db
def test_it_hides_another_owners_token(alice_client, bob):
    token, raw = ApiToken.issue(bob, "bob's")
    assert alice_client.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    assert ApiToken.authenticate(raw) == token


@pytest.mark.django_db
def test_it_rejects_wrong_methods(alice_client, alice):
    token, _ = ApiToken.issue(alice, "laptop")
    assert alice_client.get(reverse("token-revoke", args=[token.pk])).status_code == 405
    assert alice_client.get(reverse("token-create")).status_code == 405
    assert alice_client.post(reverse("tokens")).status_code == 405
    token.refresh_from_db()
    assert not token.is_revoked


@pytest.mark.django_db
def test_it_needs_a_csrf_token_to_create(csrf_client, alice):
    assert csrf_client.post(reverse("token-create"), {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()
