"""Upload, preview and import on /store/ in a real browser, at laptop and phone widths."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from memories.access_log import AccessRecord, preview_of
from memories.models import ApiToken, Memory
from tests.base import make_memory
from tests.browser.conftest import LAPTOP, PHONE, log_in, new_page, screenshot

pytestmark = pytest.mark.browser

FILE = (
    "".join(
        json.dumps(record) + "\n"
        for record in (
            {"id": 1, "content": "Olivia keeps bees on her allotment.", "type": "semantic"},
            {"id": 2, "content": "Olivia prefers oat milk in coffee.", "type": "preference"},
        )
    )
    + "this line is not JSON\n"
)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_upload_preview_and_import(browser, live_server, owner, settings, tmp_path, viewport):
    settings.DATA_DIR = tmp_path
    make_memory(owner, "Olivia prefers oat milk in coffee.")
    page = new_page(browser, viewport=viewport)
    try:
        log_in(page, live_server)
        page.goto(f"{live_server.url}/memories/")
        page.get_by_role("link", name="Download or upload them all").click()
        expect(page.get_by_role("heading", name="Download or upload your memories")).to_be_visible()
        expect(page.get_by_role("link", name="Download all memories")).to_be_visible()

        page.get_by_label("File to import").set_input_files(
            {"name": "olivia.jsonl", "mimeType": "application/jsonl", "buffer": FILE.encode()}
        )
        page.get_by_role("button", name="Preview the import").click()

        summary = page.locator("[data-import-summary]")
        expect(summary.locator('[data-count="good"]')).to_contain_text("2 memories to add")
        expect(summary.locator('[data-count="bad"]')).to_contain_text("1 line that cannot be read")
        expect(summary.locator('[data-count="repeats"]')).to_contain_text("1 of them repeat")
        expect(page.locator("[data-bad-line]")).to_contain_text("Line 3: not JSON")
        expect(page.locator("[data-import-line]")).to_have_count(2)
        assert Memory.objects.filter(owner=owner).count() == 1
        wide = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert not wide, "the preview scrolls sideways"
        screenshot(page, f"store-preview-{viewport['width']}")

        page.get_by_role("button", name="Import 2 memories").click()
        expect(page.locator(".flash")).to_contain_text(
            "Imported 2 memories from olivia.jsonl; 1 line was left out"
        )
        assert Memory.objects.filter(owner=owner).count() == 3
        assert Memory.objects.filter(owner=owner, content__contains="bees").exists()
    finally:
        page.context.close()


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_memory_and_a_token_say_what_was_sent(browser, live_server, owner, viewport):
    seats = make_memory(owner, "Olivia prefers an aisle seat on long-haul flights.")
    laptop = ApiToken.issue(owner, name="laptop")[0]
    for _ in range(3):
        AccessRecord.objects.create(
            owner=owner,
            token=laptop,
            memory_ids=[seats.pk],
            query_preview=preview_of("Which seat do I like on long flights to Lisbon next May?"),
        )
    page = new_page(browser, viewport=viewport)
    try:
        log_in(page, live_server)
        page.goto(f"{live_server.url}/memories/{seats.pk}/")
        expect(page.locator("[data-delivery]")).to_contain_text("Sent to laptop 3 times, last")
        page.get_by_role("link", name="laptop").click()
        expect(page.get_by_role("heading", name="What “laptop” received")).to_be_visible()
        expect(page.locator("[data-access-record]")).to_have_count(3)
        expect(page.locator("[data-access-record]").first).to_contain_text(
            "Which seat do I like on long flights…"
        )
        wide = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert not wide, "the token page scrolls sideways"
        screenshot(page, f"token-access-{viewport['width']}")
        page.locator("[data-access-record]").first.get_by_role("link", name=f"#{seats.pk}").click()
        expect(page.get_by_role("heading", name=seats.content)).to_be_visible()
    finally:
        page.context.close()
