"""At phone width (390 × 844) and on a laptop: nothing clipped, nothing stretched."""

import pytest

from tests.browser.conftest import LAPTOP, PHONE, log_in, new_page, screenshot
from tests.browser.walk import seed_walk

pytestmark = pytest.mark.browser

# Every element that holds a time, a badge or a table value, and overflows its box.
CLIPPED = """
() => Array.from(document.querySelectorAll(
    'td, .when, .when time, .when .relative, .badge, .state, .source-cell'
  ))
  .filter(element => element.offsetParent !== null)
  .filter(element => element.scrollWidth > element.clientWidth + 1
    || element.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
  .map(element => element.className + ': ' + element.textContent.trim().slice(0, 60))
"""


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_it_clips_no_time_on_the_list_the_event_log_and_the_tokens(
    browser, live_server, owner, viewport
):
    walk = seed_walk(owner)
    page = new_page(browser, viewport=viewport)
    log_in(page, live_server)
    width = viewport["width"]
    for name, path in [
        ("memory-list", "/memories/"),
        ("chain", f"/memories/{walk.chain_head.pk}/"),
        ("tokens", "/tokens/"),
        ("home", "/"),
    ]:
        page.goto(f"{live_server.url}{path}")
        assert page.locator(".when").count() > 0
        assert page.evaluate(CLIPPED) == [], f"{path} at {width}px"
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        screenshot(page, f"layout-{name}-{width}")
    page.context.close()


def test_it_keeps_the_revoked_badge_its_own_size_on_a_phone(browser, live_server, owner):
    seed_walk(owner)
    page = new_page(browser, viewport=PHONE)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/tokens/")
    revoked = page.locator(".badge", has_text="Revoked").bounding_box()
    live = page.locator(".badge", has_text="Live").bounding_box()
    assert revoked["height"] == pytest.approx(live["height"], abs=1)
    # Beside its label, not stretched across the row.
    assert revoked["width"] < 120
    page.context.close()
