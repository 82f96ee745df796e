from __future__ import annotations

import pytest


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client
