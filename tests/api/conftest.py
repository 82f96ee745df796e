"""API tests talk real HTTP to a live server over the real test database."""

from __future__ import annotations

import pytest
import requests

from memories.models import ApiToken


class ApiClient:
    """A requests session bound to the live server, with an optional bearer token."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        return self.session.request(method, self.base_url + path, **kwargs)

    def get(self, path: str, **kwargs) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, json=None, **kwargs) -> requests.Response:
        return self.request("POST", path, json=json, **kwargs)

    def create(self, content: str, type: str = "semantic", mode: str = "remember", **fields):
        response = self.post(
            "/v1/memories", {"content": content, "type": type, "mode": mode, **fields}
        )
        assert response.status_code == 201, response.text
        return response.json()


def issue_token(owner) -> str:
    return ApiToken.issue(owner, name="test")[1]


@pytest.fixture
def make_api(live_server):
    """Build clients; close their connections after the test so no server thread
    keeps a database session open past the test."""
    clients: list[ApiClient] = []

    def build(token: str | None = None) -> ApiClient:
        client = ApiClient(live_server.url, token)
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.session.close()


@pytest.fixture
def alice_token(alice) -> str:
    return issue_token(alice)


@pytest.fixture
def alice_api(make_api, alice_token) -> ApiClient:
    return make_api(alice_token)


@pytest.fixture
def bob_api(make_api, bob) -> ApiClient:
    return make_api(issue_token(bob))


@pytest.fixture
def anonymous_api(make_api) -> ApiClient:
    return make_api()
