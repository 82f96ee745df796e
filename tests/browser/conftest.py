"""Browser tests: a real headless Chromium (Debian's) driven by Playwright.

Each test logs in through the login page of a live server and saves a
screenshot of the page it ends on under ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

# Playwright's sync API keeps an event loop running in this thread; the ORM
# calls the tests make in between page actions are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

from tests.fakes.fixtures import fake_openai, openai_embeddings  # noqa: E402, F401

CHROMIUM = os.environ.get("TIMOTHY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"
LAPTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
PASSWORD = "owner-password-1"
# A click whose request does heavy work at once under test (a redaction's erase
# from disk: background tasks run inline here) waits for its navigation this
# long; on a busy two-core machine it has taken over 10 s.
HEAVY_REQUEST_MS = 90_000


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def owner(transactional_db):
    return get_user_model().objects.create_user("olivia", password=PASSWORD)


@pytest.fixture
def stranger(transactional_db):
    return get_user_model().objects.create_user("sam", password=PASSWORD)


def new_page(
    browser: Browser,
    *,
    viewport: dict = LAPTOP,
    javascript: bool = True,
    timezone: str = settings.TIME_ZONE,
) -> Page:
    context = browser.new_context(
        viewport=viewport,
        java_script_enabled=javascript,
        timezone_id=timezone,
        locale="en-GB",
    )
    context.set_default_timeout(10_000)
    return context.new_page()


def log_in(page: Page, live_server, username: str = "olivia") -> None:
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/$"))


@pytest.fixture
def page(browser: Browser, live_server, owner) -> Iterator[Page]:
    page = new_page(browser)
    log_in(page, live_server)
    yield page
    page.context.close()


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
