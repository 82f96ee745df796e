import re

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


def test_it_works_the_queue_from_the_keyboard(page, live_server, owner):
    first, second, third, fourth = (
        Memory.propose(owner, f"Olivia fact number {n}.", Memory.Type.SEMANTIC) for n in range(4)
    )
    page.goto(f"{live_server.url}/queue/")

    page.keyboard.press("j")
    expect(page.locator(f"#proposal-{first.pk}")).to_have_class(re.compile(r"\bis-current\b"))
    page.keyboard.press("c")
    expect(page.get_by_role("status")).to_contain_text("Confirmed “Olivia fact number 0.”")
    # The position is kept, so the next proposal is now the current one.
    expect(page.locator(f"#proposal-{second.pk}")).to_have_class(re.compile(r"\bis-current\b"))

    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("r")
    expect(page.get_by_role("status")).to_contain_text("Rejected “Olivia fact number 1.”")

    page.keyboard.press("x")
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(page.locator("[data-selected-count]")).to_have_text("2 of 2 selected")
    page.get_by_role("button", name="Confirm selected").click()
    expect(page.get_by_role("status")).to_contain_text("Confirmed 2 memories.")

    statuses = {m.pk: m.status for m in Memory.objects.filter(owner=owner)}
    assert statuses == {
        first.pk: "active",
        second.pk: "rejected",
        third.pk: "active",
        fourth.pk: "active",
    }
    screenshot(page, "queue-empty")


def test_it_opens_the_editor_with_e(page, live_server, owner):
    proposal = Memory.propose(owner, "Olivia likes jazz.", Memory.Type.PREFERENCE)
    page.goto(f"{live_server.url}/queue/")
    page.keyboard.press("j")
    page.keyboard.press("e")
    expect(page).to_have_url(f"{live_server.url}/memories/{proposal.pk}/edit/?next=/queue/")
    expect(page.get_by_label("Content")).to_have_value("Olivia likes jazz.")
    screenshot(page, "edit-proposal")


def test_it_ignores_shortcuts_while_typing(page, live_server, owner):
    proposal = Memory.propose(owner, "Olivia likes jazz.", Memory.Type.PREFERENCE)
    page.goto(f"{live_server.url}/queue/")
    page.keyboard.press("j")
    reason = page.get_by_label("Reason for rejecting memory")
    reason.fill("")
    reason.type("crc")
    expect(reason).to_have_value("crc")
    proposal.refresh_from_db()
    assert proposal.status == Memory.Status.PROPOSED
