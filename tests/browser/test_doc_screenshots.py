"""The screenshots in docs/screenshots/, taken from the walk's store.

    TIMOTHY_DOC_SCREENSHOTS=1 .venv/bin/pytest tests/browser/test_doc_screenshots.py

writes them into docs/screenshots/ (``make screenshots``); otherwise they go to
test-artifacts/ like every browser test's. Either way the pages are checked as
they are shot: no sideways scrolling, no clipped text.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from tests.browser.conftest import LAPTOP, PHONE, SCREENSHOTS, log_in, new_page
from tests.browser.test_phone_layout import CLIPPED
from tests.browser.walk import COFFEE_QUESTION, seed_walk
from tests.fakes.openai_server import deterministic_vector

pytestmark = pytest.mark.browser

DOCS = Path(settings.BASE_DIR) / "docs" / "screenshots"
# Tall enough for the first few candidates, short enough to read in a page of docs.
MAX_HEIGHT = 1400


def shoot(page: Page, name: str, selector: str | None = None) -> None:
    """The region of ``selector`` (or the whole page), at most MAX_HEIGHT pixels tall."""
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    assert page.evaluate(CLIPPED) == []
    folder = DOCS if os.environ.get("TIMOTHY_DOC_SCREENSHOTS") else SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"]
    if selector:
        box = page.locator(selector).first.bounding_box()
        top = box["y"] + page.evaluate("window.scrollY") - 12
        height = min(box["height"] + 24, MAX_HEIGHT)
    else:
        top, height = 0, min(page.evaluate("document.documentElement.scrollHeight"), MAX_HEIGHT)
    page.screenshot(
        path=str(folder / f"{name}.png"),
        full_page=True,
        clip={"x": 0, "y": max(0, top), "width": width, "height": height},
    )


def inspect(page: Page, live_server) -> None:
    page.goto(f"{live_server.url}/inspect/")
    page.get_by_label("Message").fill(COFFEE_QUESTION)
    page.get_by_label("Token budget").fill("120")
    page.get_by_role("button", name="Inspect").click()
    expect(page.locator("[data-explain]").first).to_be_visible()


def test_it_shoots_the_inspector(browser, live_server, owner, openai_embeddings):
    walk = seed_walk(owner, embeddings=True)
    openai_embeddings.vectors[COFFEE_QUESTION] = deterministic_vector(walk.coffee.content, 384)
    page = new_page(browser, viewport=LAPTOP)
    log_in(page, live_server)
    inspect(page, live_server)
    shoot(page, "inspector", "#scores-title + *, section[aria-labelledby=scores-title]")
    shoot(page, "inspector-block", "section[aria-labelledby=block-title]")
    page.context.close()

    phone = new_page(browser, viewport=PHONE)
    log_in(phone, live_server)
    inspect(phone, live_server)
    shoot(phone, "inspector-phone", "section[aria-labelledby=scores-title]")
    phone.context.close()


def test_it_shoots_the_phone_layout(browser, live_server, owner):
    walk = seed_walk(owner)
    page = new_page(browser, viewport=PHONE)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/memories/")
    shoot(page, "phone-memories", ".memories-table")
    page.goto(f"{live_server.url}/memories/{walk.chain_head.pk}/")
    shoot(page, "phone-event-log", "section[aria-labelledby=events-title]")
    page.goto(f"{live_server.url}/tokens/")
    shoot(page, "phone-tokens", "section[aria-labelledby=list-title]")
    page.goto(f"{live_server.url}/memories/{walk.recipe.pk}/")
    page.locator(".full-text > summary").click()
    shoot(page, "phone-long-memory", "article.memory-card")
    page.context.close()
