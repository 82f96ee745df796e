"""Under the Content-Security-Policy every page works in a real browser and the
browser reports no violation: nothing inline, nothing from elsewhere."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from tests.base import make_memory
from tests.browser.conftest import screenshot
from timothy.security_headers import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.browser

WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


@pytest.fixture
def watched(page):
    page.add_init_script(WATCH_VIOLATIONS)
    console: list[str] = []
    page.on(
        "console",
        lambda message: (
            console.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.console_violations = console
    return page


def violations(page) -> list[str]:
    return page.evaluate("window.__cspViolations") + page.console_violations


def test_it_runs_every_page_without_a_violation(watched, live_server, owner):
    owner.is_staff = owner.is_superuser = True
    owner.save()
    memory = make_memory(owner, "Olivia likes green tea.", entities=["Olivia"])
    make_memory(owner, "Olivia drinks tea at five.", status=Memory.Status.PROPOSED, confidence=0.6)
    page = watched
    for path in (
        "/",
        "/queue/",
        "/memories/",
        f"/memories/{memory.pk}/",
        f"/memories/{memory.pk}/edit/",
        "/tokens/",
        "/admin/",
        f"/admin/memories/memory/{memory.pk}/change/",
    ):
        response = page.goto(live_server.url + path)
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert violations(page) == [], path

    # The queue's confidence meter is drawn by a width class.
    page.goto(live_server.url + "/queue/")
    meter = page.locator(".meter span").first
    assert meter.evaluate("element => element.getBoundingClientRect().width") == pytest.approx(
        0.6 * page.locator(".meter").first.evaluate("e => e.getBoundingClientRect().width"),
        abs=1,
    )

    # The inspector's bars, and its script-driven parts.
    page.goto(live_server.url + "/inspect/")
    page.get_by_label("Message").fill("What tea does Olivia like?")
    page.get_by_role("button", name="Inspect").click()
    expect(page.locator(".budget-bar .budget-memories")).to_be_attached()
    widths = page.locator(".bar-track .bar").evaluate_all(
        "bars => bars.map(bar => bar.getBoundingClientRect().width)"
    )
    assert widths and max(widths) > 0
    assert violations(page) == []
    screenshot(page, "csp-inspector")


def test_it_runs_the_api_docs_under_the_policy(watched, live_server):
    page = watched
    response = page.goto(live_server.url + "/api/docs/")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Timothy Memory API")
    expect(page.locator(".opblock").first).to_be_visible()
    assert violations(page) == []
    screenshot(page, "csp-api-docs")


def test_it_shows_a_new_token_with_its_copy_button(watched, live_server):
    page = watched
    page.goto(live_server.url + "/tokens/")
    page.get_by_label("Token name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_text("tm_", exact=False).first).to_be_visible()
    expect(page.get_by_role("button", name="Copy")).to_be_visible()
    assert violations(page) == []
