"""Adding a memory in the browser, from the home page and the memories page."""

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from tests.browser.conftest import LAPTOP, PHONE, log_in, new_page, screenshot

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_it_adds_a_memory_from_the_home_page(browser, live_server, owner, viewport):
    page = new_page(browser, viewport=viewport)
    log_in(page, live_server)
    form = page.locator(".add-card")
    form.get_by_label("What should your assistant remember?").fill("Olivia is allergic to peanuts.")
    form.get_by_label("Type").select_option(label="Fact (semantic)")
    form.get_by_label("Entities (optional)").fill("Olivia, peanuts")
    form.get_by_role("button", name="Remember").click()

    expect(page.get_by_role("status").first).to_contain_text(
        "Remembered “Olivia is allergic to peanuts.”"
    )
    assert page.url == f"{live_server.url}/"
    memory = Memory.objects.get(owner=owner)
    assert (memory.status, memory.source, memory.confidence) == ("active", "remember", 1.0)
    assert memory.entity_refs == ["Olivia", "peanuts"]
    expect(page.locator(".events")).to_contain_text("Olivia is allergic to peanuts.")
    screenshot(page, f"add-memory-home-{viewport['width']}")
    page.context.close()


def test_it_adds_from_the_memories_page_and_shows_errors_on_the_form(page, live_server, owner):
    page.goto(f"{live_server.url}/memories/")
    expect(page.get_by_role("heading", name="No memories yet")).to_be_visible()
    card = page.locator(".add-card")
    # Open on an empty store, so the first memory is one step away.
    expect(card.get_by_label("What should your assistant remember?")).to_be_visible()
    card.get_by_label("What should your assistant remember?").fill("   ")
    card.get_by_label("Entities (optional)").fill("Lisbon")
    # The browser's own check is bypassed to see the server's answer.
    page.locator(".add-form").evaluate("form => form.noValidate = true")
    card.get_by_role("button", name="Remember").click()

    expect(page.get_by_role("heading", name="Add a memory")).to_be_visible()
    expect(page.get_by_role("alert").first).to_contain_text("Nothing was saved")
    expect(page.get_by_text("This field is required.")).to_be_visible()
    expect(page.get_by_label("Entities (optional)")).to_have_value("Lisbon")
    screenshot(page, "add-memory-error")

    page.get_by_label("What should your assistant remember?").fill("Olivia moved to Lisbon.")
    page.get_by_label("Type").select_option(label="Event (episodic)")
    page.get_by_role("button", name="Remember").click()
    assert page.url == f"{live_server.url}/memories/"
    expect(page.locator(".memories-table")).to_contain_text("Olivia moved to Lisbon.")
    assert Memory.objects.get(owner=owner).type == Memory.Type.EPISODIC
