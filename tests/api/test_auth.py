import pytest
from django.utils import timezone

from memories.models import ApiToken
from tests.api.conftest import issue_token

ROUTES = [
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories"),
    ("POST", "/v1/memories/1"),
    ("GET", "/v1/memories/1/chain"),
    ("POST", "/v1/memories/search"),
]


def assert_unauthorized(response):
    assert response.status_code == 401
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_it_requires_a_token_on_every_route(anonymous_api, method, path):
    assert_unauthorized(anonymous_api.request(method, path, json={}))


@pytest.mark.parametrize(
    "header", ["Basic YWxpY2U6cGFzcw==", "Bearer", "Bearer tm_not-a-real-token", "tm_abc"]
)
def test_it_refuses_a_bad_authorization_header(anonymous_api, header):
    response = anonymous_api.get("/v1/memories", headers={"Authorization": header})
    assert_unauthorized(response)


def test_it_refuses_a_revoked_token(make_api, alice):
    raw = issue_token(alice)
    api = make_api(raw)
    assert api.get("/v1/memories").status_code == 200
    ApiToken.objects.get(digest=ApiToken.digest_of(raw)).revoke()
    assert_unauthorized(api.get("/v1/memories"))


def test_it_refuses_the_token_of_a_deactivated_owner(make_api, alice):
    api = make_api(issue_token(alice))
    alice.is_active = False
    alice.save()
    assert_unauthorized(api.get("/v1/memories"))


def test_it_stamps_when_a_token_was_last_used(make_api, alice):
    raw = issue_token(alice)
    before = timezone.now()
    make_api(raw).get("/v1/memories")
    token = ApiToken.objects.get(digest=ApiToken.digest_of(raw))
    assert token.last_used_at >= before
