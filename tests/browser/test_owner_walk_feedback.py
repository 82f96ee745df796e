"""The owner's walk through the pages, at laptop and phone widths: feedback and
Undo where the owner is looking, the list's status tabs, archive and its Undo,
and a redaction that also offers the other memories holding the same text."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memories.models import REDACTED_CONTENT, Memory
from tests.browser.conftest import HEAVY_REQUEST_MS, LAPTOP, PHONE, SCREENSHOTS, log_in, new_page

pytestmark = pytest.mark.browser

WIDTHS = {"laptop": LAPTOP, "phone": PHONE}


def screenshot(page, name: str, *, full_page: bool = False) -> None:
    """What the owner sees: the window, not the whole page (the toasts are fixed to it)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


def in_viewport(page, locator) -> bool:
    box = locator.bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height


@pytest.fixture(params=list(WIDTHS))
def sized(request, browser, live_server, owner):
    page = new_page(browser, viewport=WIDTHS[request.param])
    log_in(page, live_server)
    yield request.param, page
    page.context.close()


def test_a_queue_action_shows_its_feedback_and_undo_where_the_owner_is(sized, live_server, owner):
    width, page = sized
    proposals = [
        Memory.propose(owner, f"Olivia's fact number {n} is true", Memory.Type.SEMANTIC)
        for n in range(1, 9)
    ]
    page.goto(f"{live_server.url}/queue/")
    seventh = page.locator(f"#proposal-{proposals[6].pk}")
    seventh.scroll_into_view_if_needed()
    seventh.get_by_role("button", name="Reject").click()

    page.wait_for_url(re.compile(r"/queue/"))
    toast = page.locator("[data-toasts]")
    expect(toast.get_by_role("status")).to_contain_text("Rejected “Olivia's fact number 7")
    undo = toast.locator("[data-undo]")
    expect(undo).to_contain_text("Rejected “Olivia's fact number 7 is true”")
    expect(undo).not_to_contain_text("..")
    # The feedback is on screen, and so is the proposal that came next.
    assert in_viewport(page, undo)
    assert in_viewport(page, toast.get_by_role("status"))
    assert page.evaluate("window.scrollY") > 0
    screenshot(page, f"owner-walk-queue-undo-{width}")

    undo.get_by_role("button", name="Undo").click()
    expect(page.locator("[data-toasts]").get_by_role("status")).to_contain_text(
        "Restored “Olivia's fact number 7 is true” to the queue."
    )
    assert Memory.objects.get(pk=proposals[6].pk).status == Memory.Status.PROPOSED

    # Confirmed by the owner: the owner's confidence and source on its page.
    page.locator(f"#proposal-{proposals[7].pk}").get_by_role("button", name="Confirm").click()
    expect(page.locator("[data-toasts]")).to_contain_text("Confirmed “Olivia's fact number 8")
    page.goto(f"{live_server.url}/memories/{proposals[7].pk}/")
    expect(page.locator("main")).to_contain_text("Written or confirmed by the owner on the pages")
    expect(page.locator("main")).to_contain_text("1.00")


def test_the_list_opens_on_active_memories_and_an_archive_can_be_undone(sized, live_server, owner):
    width, page = sized
    kept = Memory.remember(owner, "Olivia cycles to work.", Memory.Type.SEMANTIC)
    Memory.propose(owner, "Olivia may like jazz.", Memory.Type.PREFERENCE)
    page.goto(f"{live_server.url}/memories/")

    tabs = page.locator("[data-status-tabs]")
    expect(tabs.locator('[aria-current="page"]')).to_contain_text("Active 1")
    expect(tabs.locator('[data-status-tab="proposed"]')).to_contain_text("Proposed 1")
    expect(page.locator(".memories-table tbody tr")).to_have_count(1)
    row = page.locator(".memories-table tbody tr").first
    row.scroll_into_view_if_needed()
    # A compact row: the text, then its type, status, confidence, source and date.
    assert row.bounding_box()["height"] < 150
    screenshot(page, f"owner-walk-list-{width}")
    tabs.locator('[data-status-tab="all"]').click()
    expect(page.locator(".memories-table tbody tr")).to_have_count(2)

    page.goto(f"{live_server.url}/memories/{kept.pk}/archive/")
    page.get_by_label("Reason (optional)").fill("I sold the bike")
    page.get_by_role("button", name="Archive").click()
    toast = page.locator("[data-toasts]")
    expect(toast).to_contain_text("Archived “Olivia cycles to work.”")
    assert in_viewport(page, toast)
    screenshot(page, f"owner-walk-archived-{width}")
    assert Memory.objects.get(pk=kept.pk).status == Memory.Status.ARCHIVED

    toast.get_by_role("button", name="Undo").click()
    expect(page.locator("[data-toasts]")).to_contain_text("is active again")
    assert Memory.objects.get(pk=kept.pk).status == Memory.Status.ACTIVE


def test_redacting_offers_the_other_memories_with_the_same_text(sized, live_server, owner):
    width, page = sized
    first = Memory.remember(owner, "Olivia's PIN is 1234", Memory.Type.SEMANTIC)
    secret = first.supersede("Olivia's PIN is 4417", actor=owner, reason="changed")
    copy = Memory.propose(owner, "Olivia's PIN is 4417", Memory.Type.SEMANTIC)
    copy.reject(actor=owner, reason="already known")
    longer = Memory.propose(owner, "Note: Olivia's PIN is 4417 at the bank", Memory.Type.SEMANTIC)
    page.goto(f"{live_server.url}/memories/{secret.pk}/redact/")

    same = page.locator("[data-same-text]")
    expect(same.locator('input[name="also"]')).to_have_count(2)
    expect(same).to_contain_text("(rejected)")
    # Each box and radio sits on the first line of its text.
    choices = page.locator(".redact-card label.choice")
    expect(choices).to_have_count(5)  # two scopes, two other memories, erase from disk
    for choice in choices.all():
        box = choice.locator("input").bounding_box()
        text = choice.locator("span").first.bounding_box()
        assert abs(box["y"] - text["y"]) < 8, (box, text)
        assert box["x"] < text["x"]
    screenshot(page, f"owner-walk-redact-{width}", full_page=True)

    # The same text is ticked; a longer one that contains it is the owner's to tick.
    expect(same.locator(f'input[value="{copy.pk}"]')).to_be_checked()
    expect(same.locator(f'input[value="{longer.pk}"]')).not_to_be_checked()
    page.get_by_label("Reason", exact=True).fill("a PIN, by mistake")
    page.get_by_role("button", name="Erase for good").click(timeout=HEAVY_REQUEST_MS)
    expect(page.locator("[data-toasts]")).to_contain_text(f"and #{copy.pk}")
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[secret.pk] == statuses[copy.pk] == Memory.Status.REDACTED
    assert Memory.objects.get(pk=copy.pk).content == REDACTED_CONTENT
    assert statuses[longer.pk] == Memory.Status.PROPOSED
