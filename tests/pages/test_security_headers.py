"""Every page carries the Content-Security-Policy and has nothing inline for it
to block; the page that shows a token's secret is never cached."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memories.models import Memory
from tests.base import make_memory
from timothy.security_headers import CONTENT_SECURITY_POLICY

POLICY_PARTS = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
]
# Markup a strict policy blocks: inline scripts, inline styles, event handler attributes.
INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=", re.I)


@pytest.fixture
def staff_client(client, alice):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client.force_login(alice)
    return client


def pages(alice) -> list[tuple[str, str, dict | None]]:
    memory = make_memory(alice, "Likes tea.", entities=["tea"])
    make_memory(alice, "Likes green tea.", status=Memory.Status.PROPOSED, confidence=0.37)
    return [
        ("GET", reverse("home"), None),
        ("GET", reverse("queue"), None),
        ("GET", reverse("memory-list"), None),
        ("GET", reverse("memory-detail", args=[memory.pk]), None),
        ("GET", reverse("memory-edit", args=[memory.pk]), None),
        ("GET", reverse("inspect"), None),
        (
            "POST",
            reverse("inspect"),
            {"message": "tea", "budget": "200", "pipeline": "fusion"},
        ),
        ("GET", reverse("tokens"), None),
        ("GET", "/admin/", None),
        ("GET", "/admin/memories/memory/", None),
        ("GET", f"/admin/memories/memory/{memory.pk}/change/", None),
        ("GET", reverse("api-docs"), None),
        ("GET", "/no-such-page/", None),
    ]


@pytest.mark.django_db
def test_it_sends_the_policy_and_nothing_inline_on_every_page(staff_client, alice):
    for method, path, data in pages(alice):
        response = staff_client.get(path) if method == "GET" else staff_client.post(path, data)
        assert response.status_code in (200, 404), (path, response.status_code)
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
        html = response.content.decode()
        assert not INLINE.findall(html), (path, INLINE.findall(html)[:3])
        if method == "POST":
            assert 'class="bar bar-' in html and 'class="budget-bar"' in html


@pytest.mark.django_db
def test_it_sends_the_policy_to_the_signed_out(client):
    for path in (reverse("login"), "/admin/login/", "/v1/memories", "/api/schema/"):
        response = client.get(path)
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
    html = client.get(reverse("login")).content.decode()
    assert not INLINE.findall(html)


def test_it_keeps_the_policy_strict():
    for part in POLICY_PARTS:
        assert part in CONTENT_SECURITY_POLICY.split("; ")
    assert "unsafe" not in CONTENT_SECURITY_POLICY


@pytest.mark.django_db
def test_it_loads_the_api_docs_script_from_its_own_address(client):
    page = client.get(reverse("api-docs")).content.decode()
    [script] = re.findall(r'<script src="([^"]*\?[^"]*script[^"]*)"', page)
    response = client.get(script.replace("&amp;", "&"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in response.content.decode()


@pytest.mark.django_db
def test_it_never_lets_a_cache_keep_the_tokens_page(alice_client):
    response = alice_client.get(reverse("tokens"))
    assert "no-store" in response["Cache-Control"]
    assert "private" in response["Cache-Control"]
    response = alice_client.post(
        reverse("token-create"),
        {"name": "laptop", "scopes": ["read", "propose", "write"]},
        follow=True,
    )
    assert b"tm_" in response.content  # the secret, shown once
    assert "no-store" in response["Cache-Control"]
    for hop, _ in response.redirect_chain:
        assert hop == reverse("tokens")
    failed = alice_client.post(reverse("token-create"), {"name": ""})
    assert "no-store" in failed["Cache-Control"]


@pytest.mark.django_db
def test_it_draws_bars_with_width_classes(alice_client, alice):
    make_memory(alice, "Likes green tea.", status=Memory.Status.PROPOSED, confidence=0.37)
    page = alice_client.get(reverse("queue")).content.decode()
    assert '<span class="w-37"></span>' in page
