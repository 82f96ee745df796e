import pytest
from playwright.sync_api import expect

from memories.models import ApiToken, Memory
from tests.base import make_memory
from tests.browser.conftest import PASSWORD, log_in, new_page, screenshot

pytestmark = pytest.mark.browser

# Controls a person can operate, each with the name a screen reader would announce.
UNLABELLED_CONTROLS = """
() => Array.from(document.querySelectorAll(
    "input:not([type=hidden]), select, textarea, button, a[href]"
)).filter((el) => {
    if (el.closest("[hidden]") || el.hidden) return false;
    const label = (el.labels && el.labels.length)
        || el.getAttribute("aria-label")
        || el.getAttribute("aria-labelledby")
        || (el.matches("button, a") && el.textContent.trim())
        || (el.matches("a") && el.querySelector("img[alt]:not([alt=''])"));
    return !label;
}).map((el) => el.outerHTML.slice(0, 120))
"""


def test_it_labels_every_control_on_every_page(page, live_server, owner):
    proposal = Memory.propose(owner, "Olivia likes jazz.", Memory.Type.PREFERENCE)
    active = make_memory(owner, "Olivia plays the cello.", entities=["Olivia"])
    ApiToken.issue(owner, "laptop")
    paths = [
        "/",
        "/queue/",
        "/memories/?q=cello",
        f"/memories/{active.pk}/",
        f"/memories/{proposal.pk}/",
        f"/memories/{proposal.pk}/edit/",
        f"/memories/{active.pk}/archive/",
        "/inspect/",
        "/tokens/",
    ]
    for path in paths:
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate(UNLABELLED_CONTROLS) == [], path

    page.goto(f"{live_server.url}/inspect/")
    page.get_by_label("Message").fill("cello")
    page.get_by_role("button", name="Inspect").click()
    expect(page.locator("#recall-block")).to_be_visible()
    assert page.evaluate(UNLABELLED_CONTROLS) == []


def test_it_shows_where_the_keyboard_focus_is(page, live_server, owner):
    page.goto(f"{live_server.url}/")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Tab")
    outline = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, parseFloat(s.outlineWidth)]; }"
    )
    assert outline[0] == "solid" and outline[1] >= 2
    screenshot(page, "focus-visible")


def test_it_shows_times_in_the_browsers_time_zone(browser, live_server, owner):
    make_memory(owner, "Olivia visits Tokyo.")
    page = new_page(browser, timezone="Asia/Tokyo")
    log_in(page, live_server)
    page.goto(f"{live_server.url}/memories/")
    expect(page.locator("footer")).to_contain_text("times in JST")
    expect(page.locator(".memories-table time").first).to_contain_text("JST")
    page.context.close()


def test_it_says_when_the_password_is_wrong(browser, live_server, owner):
    page = new_page(browser)
    page.goto(f"{live_server.url}/queue/")
    expect(page).to_have_url(f"{live_server.url}/login/?next=/queue/")
    assert page.evaluate(UNLABELLED_CONTROLS) == []
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("do not match")
    screenshot(page, "login-failed")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live_server.url}/queue/")
    page.context.close()
