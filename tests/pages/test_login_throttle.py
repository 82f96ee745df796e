"""Password sign-in is throttled per username and per client address, on our
sign-in page and the admin's, with a page that says what happened and until when."""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

LIMIT = 5  # TIMOTHY_LOGIN_FAILURE_LIMIT's default
RIGHT = "alice-password-1"


def sign_in(path: str, username: str, password: str, address: str = "10.0.0.1"):
    # A fresh client per attempt, as a guesser would: no cookie carries the count.
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def assert_paused(response) -> None:
    assert response.status_code == 429
    assert response["Retry-After"] == str(15 * 60)
    page = response.content.decode()
    assert "Sign-in paused" in page
    assert "Too many failed sign-ins for this username or from this address" in page
    assert "paused for 15 minutes after the last failed attempt" in page
    assert "_auth_user_id" not in response.client.session


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user("root", password=RIGHT, is_staff=True)


PATHS = [reverse("login"), "/admin/login/"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PATHS)
def test_it_refuses_the_right_password_after_too_many_wrong_ones(alice, staff, path):
    username = "alice" if path == reverse("login") else "root"
    for attempt in range(LIMIT - 1):
        response = sign_in(path, username, f"wrong-{attempt}")
        assert response.status_code == 200
        assert b"do not match" in response.content or b"correct username" in response.content
    # The failure that reaches the limit already answers the pause.
    assert_paused(sign_in(path, username, "wrong-again"))
    assert_paused(sign_in(path, username, RIGHT))


@pytest.mark.django_db
@pytest.mark.parametrize("path", PATHS)
def test_it_counts_per_username_across_addresses(alice, staff, path):
    username = "alice" if path == reverse("login") else "root"
    for attempt in range(LIMIT):
        sign_in(path, username, "wrong", address=f"10.0.1.{attempt}")
    assert_paused(sign_in(path, username, RIGHT, address="10.0.2.1"))
    # Another account is not paused from a fresh address.
    assert sign_in(reverse("login"), "bob", "bob-password-1", address="10.0.2.2").status_code in (
        200,
        302,
    )


@pytest.mark.django_db
def test_it_counts_per_address_across_usernames(alice):
    for attempt in range(LIMIT):
        sign_in(reverse("login"), f"guess-{attempt}", "wrong", address="10.0.3.1")
    assert_paused(sign_in(reverse("login"), "alice", RIGHT, address="10.0.3.1"))
    # The same account from another address signs in.
    assert sign_in(reverse("login"), "alice", RIGHT, address="10.0.3.2").status_code == 302


@pytest.mark.django_db
def test_it_lets_the_owner_in_below_the_limit(alice):
    for _attempt in range(LIMIT - 1):
        sign_in(reverse("login"), "alice", "wrong")
    response = sign_in(reverse("login"), "alice", RIGHT)
    assert response.status_code == 302
    assert response["Location"] == reverse("home")


@pytest.mark.django_db
def test_it_lifts_the_pause_after_the_cool_off(alice, time_machine):
    time_machine.move_to(timezone.now(), tick=False)
    for _attempt in range(LIMIT):
        sign_in(reverse("login"), "alice", "wrong")
    time_machine.shift(timedelta(minutes=14))
    assert_paused(sign_in(reverse("login"), "alice", RIGHT))
    # Attempts during the pause do not extend it: it ends 15 minutes after the last failure.
    time_machine.shift(timedelta(minutes=1, seconds=1))
    assert sign_in(reverse("login"), "alice", RIGHT).status_code == 302


@pytest.mark.django_db(transaction=True)
def test_it_throttles_over_real_http(live_server, alice):
    # What the tester did: 40 wrong passwords in a row, then the right one.
    url = live_server.url + reverse("login")
    answers = []
    for _attempt in range(40):
        session = requests.Session()
        token = session.get(url, timeout=30).cookies["csrftoken"]
        answers.append(
            session.post(
                url,
                data={"username": "alice", "password": "wrong", "csrfmiddlewaretoken": token},
                headers={"Referer": url},
                timeout=30,
            ).status_code
        )
    assert answers[: LIMIT - 1] == [200] * (LIMIT - 1)
    assert set(answers[LIMIT - 1 :]) == {429}
    session = requests.Session()
    token = session.get(url, timeout=30).cookies["csrftoken"]
    response = session.post(
        url,
        data={"username": "alice", "password": RIGHT, "csrfmiddlewaretoken": token},
        headers={"Referer": url},
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 429
    assert "Sign-in paused" in response.text
