"""Redacting from the memory's page in a real browser, with and without JavaScript."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.browser.conftest import HEAVY_REQUEST_MS, PHONE, log_in, new_page, screenshot

pytestmark = pytest.mark.browser


def seed(owner) -> tuple[Memory, Memory]:
    first = Memory.remember(
        owner, "Olivia's door code is 4417.", Memory.Type.SEMANTIC, entities=["door"]
    )
    second = first.supersede("Olivia's door code is 9021.", actor=owner, reason="changed")
    return Memory.objects.get(pk=first.pk), second


def test_it_redacts_the_whole_chain_from_the_memory_page(page, live_server, owner):
    first, second = seed(owner)
    page.goto(f"{live_server.url}/memories/{second.pk}/")

    page.get_by_role("link", name="Redact…").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Erase what this memory says, for good?"
    )
    expect(page.locator("[data-redact-text]")).to_have_text("Olivia's door code is 9021.")
    expect(page.get_by_text("1 other version of its chain keeps its text")).to_be_visible()
    screenshot(page, "redact-confirm")
    page.get_by_label(re.compile("Every version of its chain")).check()
    page.get_by_label("Reason").fill("a code, by mistake")
    page.get_by_role("button", name="Erase for good").click(timeout=HEAVY_REQUEST_MS)

    page.wait_for_url(f"**/memories/{second.pk}/")
    expect(page.get_by_text("Redacted 2 versions: the text is erased for good.")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text("Text erased")
    versions = page.locator("[data-redacted-version]")
    expect(versions).to_have_count(2)
    expect(versions.first).to_contain_text("Redacted on")
    expect(versions.first).to_contain_text("by olivia")
    expect(page.locator("main")).not_to_contain_text("4417")
    expect(page.locator("main")).not_to_contain_text("9021")
    screenshot(page, "redact-done")
    assert set(Memory.objects.values_list("content", flat=True)) == {REDACTED_CONTENT}
    event = MemoryEvent.objects.get(memory=first, action=MemoryEvent.Action.REDACTED)
    assert (event.via, event.reason) == ("page", "a code, by mistake")


def test_it_works_without_javascript_on_a_phone(browser, live_server, owner):
    first, second = seed(owner)
    page = new_page(browser, viewport=PHONE, javascript=False)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/memories/{first.pk}/")

    page.get_by_role("link", name="Redact this text…").click()
    # No reason: the browser itself holds the form back, and nothing is erased.
    page.get_by_role("button", name="Erase for good").click(timeout=HEAVY_REQUEST_MS)
    expect(page).to_have_url(re.compile(rf"/memories/{first.pk}/redact/$"))
    assert Memory.objects.get(pk=first.pk).content == "Olivia's door code is 4417."
    page.get_by_label("Reason").fill("old code")
    page.get_by_role("button", name="Erase for good").click(timeout=HEAVY_REQUEST_MS)

    page.wait_for_url(f"**/memories/{first.pk}/")
    expect(page.locator("[data-redaction]")).to_contain_text("Redacted on")
    screenshot(page, "redact-phone")
    page.context.close()
    assert Memory.objects.get(pk=first.pk).status == Memory.Status.REDACTED
    assert Memory.objects.get(pk=second.pk).content == "Olivia's door code is 9021."
