from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def alice_client(client, alice) -> Client:
    client.force_login(alice)
    return client


@pytest.fixture
def csrf_client(alice) -> Client:
    """A client that enforces CSRF, as a browser session would."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    return client


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]
