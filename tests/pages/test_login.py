import pytest
from django.urls import reverse

from tests.base import make_memory

PAGES = ["home", "queue", "memory-list", "inspect", "tokens"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES)
def test_it_sends_anonymous_visitors_to_the_login_page(client, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.django_db
def test_it_asks_anonymous_visitors_to_log_in_before_a_memory(client, alice):
    memory = make_memory(alice)
    for name in ("memory-detail", "memory-edit", "memory-archive"):
        response = client.get(reverse(name, args=[memory.pk]))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_it_does_not_act_for_anonymous_visitors(client, alice):
    memory = make_memory(alice, status="proposed")
    response = client.post(reverse("memory-confirm", args=[memory.pk]))
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.status == "proposed"


@pytest.mark.django_db
def test_it_logs_in_and_lands_on_home(client, alice):
    response = client.post(
        reverse("login"), {"username": "alice", "password": "alice-password-1"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("home")
    assert response.context["user"] == alice


@pytest.mark.django_db
def test_it_says_when_the_password_is_wrong(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert b"do not match" in response.content
    assert not response.context["user"].is_authenticated


@pytest.mark.django_db
def test_it_logs_in_with_a_csrf_token_only(alice):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-password-1"})
    assert response.status_code == 403
    page = client.get(reverse("login"))
    token = page.cookies["csrftoken"].value
    response = client.post(
        reverse("login"),
        {"username": "alice", "password": "alice-password-1", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302


@pytest.mark.django_db
def test_it_logs_out_on_post_only(alice_client):
    assert alice_client.get(reverse("logout")).status_code == 405
    response = alice_client.post(reverse("logout"))
    assert response.status_code == 302
    assert alice_client.get(reverse("home")).status_code == 302


@pytest.mark.django_db
def test_it_renders_its_own_not_found_page(alice_client):
    response = alice_client.get("/no-such-page/")
    assert response.status_code == 404
    assert b"Not found" in response.content
    assert b"timothy.css" in response.content
