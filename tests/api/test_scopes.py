"""Token scopes (read, propose, write) and pausing, on every public route, over real HTTP."""

from __future__ import annotations

import pytest

from memories.models import ApiToken

# Each route, its body, and the scope it needs.
ROUTES = [
    ("GET", "/v1/memories", None, "read"),
    ("GET", "/v1/memories/{id}/chain", None, "read"),
    ("POST", "/v1/memories/search", {"query": "bikes"}, "read"),
    (
        "POST",
        "/v1/memories",
        {"content": "Rides a blue bike to work.", "type": "semantic", "mode": "propose"},
        "propose",
    ),
    (
        "POST",
        "/v1/memories",
        {"content": "Rides a blue bike to work.", "type": "semantic", "mode": "remember"},
        "write",
    ),
    ("POST", "/v1/memories/{id}", {"action": "archive"}, "write"),
]


def token_with(owner, *scopes: str) -> str:
    return ApiToken.issue(owner, name="scoped", scopes=list(scopes))[1]


@pytest.fixture
def memory_id(alice_api) -> int:
    return alice_api.create("Keeps bees on the roof.")["id"]


@pytest.mark.parametrize(("method", "path", "body", "scope"), ROUTES)
def test_each_route_refuses_a_token_without_its_scope(
    make_api, alice, memory_id, method, path, body, scope
):
    others = [s for s in ("read", "propose", "write") if s != scope]
    api = make_api(token_with(alice, *others))
    response = api.request(method, path.format(id=memory_id), json=body)

    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "missing_scope"
    assert f"needs the {scope} scope" in error["message"]
    assert error["details"] == {"required_scope": scope, "token_scopes": others}


@pytest.mark.parametrize(("method", "path", "body", "scope"), ROUTES)
def test_each_route_lets_a_token_with_only_its_scope_through(
    make_api, alice, memory_id, method, path, body, scope
):
    api = make_api(token_with(alice, scope))
    response = api.request(method, path.format(id=memory_id), json=body)
    assert response.status_code in (200, 201), response.text


def test_a_refused_write_changes_nothing(make_api, alice, memory_id):
    api = make_api(token_with(alice, "read", "propose"))
    assert api.post(f"/v1/memories/{memory_id}", {"action": "archive"}).status_code == 403
    assert api.get(f"/v1/memories/{memory_id}/chain").json()["memories"][0]["status"] == "active"


def test_a_token_made_without_scopes_has_all_three(alice):
    token, _ = ApiToken.issue(alice, "everything")
    token.refresh_from_db()
    assert token.scopes == ["read", "propose", "write"]


@pytest.mark.parametrize(("method", "path", "body", "scope"), ROUTES)
def test_a_paused_token_is_refused_on_every_route_until_resumed(
    make_api, alice, memory_id, method, path, body, scope
):
    raw = token_with(alice, "read", "propose", "write")
    token = ApiToken.authenticate(raw)
    api = make_api(raw)
    token.pause()

    response = api.request(method, path.format(id=memory_id), json=body)
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "token_paused"
    assert error["message"] == (
        "The token “scoped” is paused: its owner can resume it on the Tokens page."
    )

    token.resume()
    response = api.request(method, path.format(id=memory_id), json=body)
    assert response.status_code in (200, 201), response.text


def test_a_revoked_token_cannot_be_paused_or_resumed_into_use(make_api, alice):
    raw = token_with(alice, "read")
    token = ApiToken.authenticate(raw)
    token.revoke()
    token.pause()
    token.resume()
    assert make_api(raw).get("/v1/memories").status_code == 401
