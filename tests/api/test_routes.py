"""The public surface is exactly five memory routes; nothing else answers under /v1/."""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

PUBLIC_ROUTES = {
    ("GET", "v1/memories"),
    ("POST", "v1/memories"),
    ("POST", "v1/memories/<int:memory_id>"),
    ("GET", "v1/memories/<int:memory_id>/chain"),
    ("POST", "v1/memories/search"),
}


def walk(patterns, prefix: str = ""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern


def served_methods(pattern: URLPattern) -> set[str]:
    view_class = getattr(pattern.callback, "view_class", None) or getattr(
        pattern.callback, "cls", None
    )
    methods = {m.upper() for m in view_class.http_method_names if hasattr(view_class, m)}
    return methods - {"HEAD", "OPTIONS"}


def test_it_serves_exactly_the_five_public_routes():
    routes = {
        (method, route)
        for route, pattern in walk(get_resolver("timothy.urls").url_patterns)
        if route.startswith("v1")
        for method in served_methods(pattern)
    }
    assert routes == PUBLIC_ROUTES


def test_it_serves_nothing_internal_on_the_public_urlconf():
    routes = [route for route, _ in walk(get_resolver("timothy.urls").url_patterns)]
    assert not [route for route in routes if "internal" in route]


def test_it_serves_only_the_internal_routes_on_the_internal_urlconf():
    routes = {route for route, _ in walk(get_resolver("timothy.internal_urls").url_patterns)}
    assert routes == {"internal/v1/retrieve", "internal/v1/extract"}


@pytest.mark.parametrize(
    "path",
    [
        "/v1",
        "/v1/",
        "/v1/memories/",
        "/v1/memories/1/",
        "/v1/memories/1/chain/",
        "/v1/memories/1/events",
        "/v1/memories/abc",
        "/v1/memories/search/more",
        "/v1/retrieve",
        "/v1/anything/at/all",
        "/v2/memories",
        "/internal/v1/retrieve",
    ],
)
def test_it_answers_json_404_off_the_routes(anonymous_api, path):
    for method in ("GET", "POST"):
        response = anonymous_api.request(method, path, json={})
        assert response.status_code == 404, (method, path)
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/v1/memories", "GET, POST, HEAD"),
        ("PUT", "/v1/memories", "GET, POST, HEAD"),
        ("GET", "/v1/memories/1", "POST"),
        ("DELETE", "/v1/memories/1", "POST"),
        ("PATCH", "/v1/memories/1", "POST"),
        ("POST", "/v1/memories/1/chain", "GET, HEAD"),
        ("GET", "/v1/memories/search", "POST"),
        ("OPTIONS", "/v1/memories", "GET, POST, HEAD"),
    ],
)
def test_it_answers_json_405_for_a_wrong_method(alice_api, method, path, allowed):
    response = alice_api.request(method, path, json={})
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert set(response.headers["Allow"].split(", ")) == set(allowed.split(", "))
