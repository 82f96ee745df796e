"""Memory text as people write it: long, right-to-left, with accents."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import LAPTOP, PHONE, log_in, new_page, screenshot
from tests.browser.walk import seed_walk

pytestmark = pytest.mark.browser

DIRECTION = "element => getComputedStyle(element).direction"


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_it_titles_a_long_memory_and_folds_the_full_text(browser, live_server, owner, viewport):
    walk = seed_walk(owner)
    page = new_page(browser, viewport=viewport)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/memories/{walk.recipe.pk}/")

    title = page.get_by_role("heading", level=1)
    expect(title).to_have_text(
        "Grandma Rosa's bolo de arroz, the way Olivia makes it for birthdays."
    )
    assert title.bounding_box()["height"] < 120
    full = page.locator(".memory-full")
    expect(full).to_be_visible()
    expect(full).to_contain_text("bake in paper collars at 200 °C")
    page.locator(".full-text > summary").click()
    expect(full).to_be_hidden()
    # The actions are on the first screen once the text is folded.
    box = page.get_by_role("button", name="Re-confirm").bounding_box()
    assert box["y"] + box["height"] < viewport["height"]
    screenshot(page, f"long-memory-{viewport['width']}")
    page.context.close()


def test_it_lays_out_right_to_left_text_right_to_left_everywhere(page, live_server, owner):
    walk = seed_walk(owner)
    arabic = walk.arabic.content

    page.goto(f"{live_server.url}/memories/")
    link = page.get_by_role("link", name=arabic)
    assert link.evaluate(DIRECTION) == "rtl"
    assert (
        page.get_by_role("link", name="Works at Acme in Lisbon since the move.").evaluate(DIRECTION)
        == "ltr"
    )
    assert page.get_by_role("link", name="سلمى").first.evaluate(DIRECTION) == "rtl"

    page.goto(f"{live_server.url}/memories/{walk.arabic.pk}/")
    assert page.get_by_role("heading", level=1).evaluate(DIRECTION) == "rtl"
    assert page.locator(".version-content").evaluate(DIRECTION) == "rtl"

    page.goto(f"{live_server.url}/")
    assert page.locator(".events bdi", has_text="سلمى").first.evaluate(DIRECTION) == "rtl"

    page.goto(f"{live_server.url}/memories/{walk.arabic.pk}/edit/")
    assert page.locator("blockquote.original").evaluate(DIRECTION) == "rtl"
    assert page.get_by_label("Content").evaluate(DIRECTION) == "rtl"

    page.goto(f"{live_server.url}/inspect/")
    page.get_by_label("Message").fill("سلمى")
    page.get_by_role("button", name="Inspect").click()
    candidate = page.locator(f'[data-candidate="{walk.arabic.pk}"] a').first
    assert candidate.evaluate(DIRECTION) == "rtl"
    screenshot(page, "right-to-left-inspector")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_it_finds_words_without_their_accents_and_highlights_them(
    browser, live_server, owner, viewport
):
    walk = seed_walk(owner)
    page = new_page(browser, viewport=viewport)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/memories/")
    page.get_by_label("Search text").fill("pasteis BELEM")
    page.get_by_role("button", name="Apply filters").click()

    expect(page.get_by_role("status")).to_have_text("1 memory matches these filters.")
    row = page.locator(".linked-row")
    expect(row).to_have_count(1)
    expect(row.locator("mark")).to_have_text(["pastéis", "Belém"])
    screenshot(page, f"accent-search-{viewport['width']}")
    # The whole row is the link: a click on its status cell lands on the link.
    row.locator('td[data-label="Status"]').click(force=True)
    page.wait_for_url(f"{live_server.url}/memories/{walk.nata.pk}/")
    page.context.close()
