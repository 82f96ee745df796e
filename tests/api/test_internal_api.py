"""The internal surface: its own URLconf (the internal listener), a service token,
and never reachable through the public listener."""

import pytest

from tests.api.conftest import issue_token
from tests.base import make_memory

SERVICE_TOKEN = "service-secret-for-tests"
INTERNAL_PATHS = ["/internal/v1/retrieve", "/internal/v1/extract"]
PUBLIC_PATHS = [
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories"),
    ("POST", "/v1/memories/1"),
    ("GET", "/v1/memories/1/chain"),
    ("POST", "/v1/memories/search"),
    ("GET", "/api/schema/"),
    ("GET", "/api/docs/"),
    ("GET", "/admin/"),
    ("GET", "/"),
]


@pytest.fixture
def internal(settings):
    """Serve the internal URLconf from the live server, as the internal listener does."""
    settings.ROOT_URLCONF = "timothy.internal_urls"
    settings.SERVICE_TOKEN = SERVICE_TOKEN


@pytest.fixture
def service_api(internal, make_api):
    return make_api(SERVICE_TOKEN)


def assert_json_error(response, status: int, code: str):
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("path", INTERNAL_PATHS)
def test_it_is_not_reachable_on_the_public_listener(settings, make_api, alice, path):
    settings.SERVICE_TOKEN = SERVICE_TOKEN
    for token in (None, SERVICE_TOKEN, issue_token(alice)):
        response = make_api(token).post(path, {"owner": "alice", "query": "anything"})
        assert_json_error(response, 404, "not_found")


@pytest.mark.parametrize(("method", "path"), PUBLIC_PATHS)
def test_it_serves_nothing_of_the_public_api(internal, make_api, alice, method, path):
    for token in (None, SERVICE_TOKEN, issue_token(alice)):
        response = make_api(token).request(method, path, json={})
        assert_json_error(response, 404, "not_found")


@pytest.mark.parametrize("path", INTERNAL_PATHS)
def test_it_refuses_every_call_without_a_configured_service_token(
    internal, settings, make_api, path
):
    settings.SERVICE_TOKEN = ""
    for token in (None, "", "anything"):
        response = make_api(token).post(path, {"owner": "alice", "query": "x"})
        assert_json_error(response, 503, "service_token_not_configured")
        assert "TIMOTHY_SERVICE_TOKEN" in response.json()["error"]["message"]


@pytest.mark.parametrize("path", INTERNAL_PATHS)
@pytest.mark.parametrize(
    "header", [None, "Bearer wrong", f"Bearer {SERVICE_TOKEN}x", f"Basic {SERVICE_TOKEN}"]
)
def test_it_refuses_a_missing_or_wrong_service_token(internal, make_api, path, header):
    headers = {"Authorization": header} if header else {}
    response = make_api().post(path, {"owner": "alice", "query": "x"}, headers=headers)
    assert_json_error(response, 401, "unauthorized")


def test_it_refuses_an_owners_api_token_on_retrieve(internal, make_api, alice):
    # An owner's token reaches extraction only (tests/extraction/test_extract_owner_token.py).
    response = make_api(issue_token(alice)).post(
        "/internal/v1/retrieve", {"owner": "alice", "query": "x"}
    )
    assert_json_error(response, 403, "service_token_required")


def test_it_lets_the_service_token_reach_extract(service_api, settings):
    # The extraction route's own behaviour is tested with extraction; here only
    # that a good token gets through to it (no LLM configured: it says so).
    settings.LLM_BASE_URL = ""
    response = service_api.post("/internal/v1/extract", {"owner": "alice", "turns": []})
    assert_json_error(response, 503, "llm_not_configured")


def test_it_answers_404_for_an_unknown_owner(service_api):
    response = service_api.post("/internal/v1/retrieve", {"owner": "nobody", "query": "x"})
    assert_json_error(response, 404, "not_found")


@pytest.mark.parametrize(
    "body",
    [
        {"query": "x"},
        {"owner": "alice"},
        {"owner": "alice", "query": "x", "token_budget": "many"},
        {"owner": "alice", "query": "x", "extra": 1},
    ],
)
def test_it_validates_the_retrieve_body(service_api, alice, body):
    response = service_api.post("/internal/v1/retrieve", body)
    assert_json_error(response, 400, "invalid_request")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_it_answers_405_for_other_methods(service_api, method):
    response = service_api.request(method, "/internal/v1/retrieve", json={})
    assert_json_error(response, 405, "method_not_allowed")


def test_it_limits_the_body(service_api, settings):
    settings.MAX_BODY_BYTES = 512
    response = service_api.post("/internal/v1/retrieve", {"owner": "alice", "query": "q" * 800})
    assert_json_error(response, 413, "payload_too_large")


def test_it_retrieves_for_the_named_owner_like_search(service_api, alice, bob):
    mine = make_memory(alice, "Alice prefers an aisle seat on long flights.")
    make_memory(bob, "Bob prefers a window seat on long flights.")
    body = {"query": "Which seat on long flights?", "token_budget": 300, "pipeline": "fusion"}
    response = service_api.post("/internal/v1/retrieve", {"owner": "alice", **body})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert [m["id"] for m in answer["memories"]] == [mine.pk]
    assert "Bob" not in answer["block"]
    assert set(answer) >= {"memories", "block", "block_tokens", "token_budget", "pipeline", "legs"}
