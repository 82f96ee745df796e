"""The queue beside related memories, each of its actions, bulk reject, restore, the
keyboard after a checkbox click, and the phone layout, in a real Chromium.

With TIMOTHY_DOCS_SCREENSHOTS=1, the conflict screenshots are also written to
docs/screenshots/ (the ones docs/pages.md shows).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from memories.models import Memory
from tests.base import make_memory
from tests.browser.conftest import PHONE, SCREENSHOTS, log_in, new_page, screenshot

pytestmark = pytest.mark.browser

DOCS_SCREENSHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"


def docs_screenshot(page, name: str, *, full_page: bool = True) -> None:
    if full_page:
        path = screenshot(page, name)
    else:
        # What the screen shows first. (A full-page capture of a touch screen
        # briefly drops the touch emulation, and with it the touch-only styles.)
        path = SCREENSHOTS / f"{name}.png"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path))
    if os.environ.get("TIMOTHY_DOCS_SCREENSHOTS") == "1":
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_SCREENSHOTS / f"{name}.png")


def conflicts(owner) -> dict[str, Memory]:
    """Two proposals that meet what the owner already holds, and one that does not."""
    aisle = make_memory(owner, "Prefers an aisle seat on long flights.", Memory.Type.PREFERENCE)
    leila = make_memory(owner, "His wife's name is Leila.", entities=["Leila"])
    make_memory(owner, "Works as a nurse at St Mary's Hospital.", entities=["St Mary's Hospital"])
    window = Memory.propose(
        owner,
        "Prefers a window seat on long flights.",
        Memory.Type.PREFERENCE,
        confidence=0.7,
        source=Memory.Source.EXTRACTION,
        session_id="chat-0412",
    )
    again = Memory.propose(
        owner,
        "His wife's name is Leila",
        Memory.Type.SEMANTIC,
        entities=["Leila"],
        confidence=0.8,
        source=Memory.Source.EXTRACTION,
        session_id="chat-0412",
    )
    peanuts = Memory.propose(owner, "Is allergic to peanuts.", Memory.Type.SEMANTIC)
    return {"aisle": aisle, "leila": leila, "window": window, "again": again, "peanuts": peanuts}


def test_it_shows_conflicts_and_confirms_as_a_new_version(page, live_server, owner):
    m = conflicts(owner)
    page.goto(f"{live_server.url}/queue/")
    window = page.locator(f"#proposal-{m['window'].pk}")
    expect(window.locator("[data-related]")).to_have_attribute("data-relation", "update")
    expect(window.locator(".relation-badge")).to_have_text("Possible update")
    expect(window.locator(".related .diff del").first).to_have_text("an")
    expect(window.locator(".related .diff ins").last).to_have_text("window")
    again = page.locator(f"#proposal-{m['again'].pk}")
    expect(again.locator(".relation-badge")).to_have_text("Likely duplicate")
    expect(page.locator(f"#proposal-{m['peanuts'].pk} .related")).to_have_count(0)
    expect(window.get_by_role("button", name="Confirm alongside")).to_be_visible()
    docs_screenshot(page, "queue-conflict-desktop")

    window.get_by_role("button", name=f"Confirm as new version of #{m['aisle'].pk}").click()

    expect(page.get_by_role("status")).to_contain_text(f"as the new version of #{m['aisle'].pk}")
    m["aisle"].refresh_from_db()
    assert m["aisle"].superseded_by_id == m["window"].pk


def test_it_rejects_as_a_duplicate_and_undoes_it(page, live_server, owner):
    m = conflicts(owner)
    page.goto(f"{live_server.url}/queue/")
    again = page.locator(f"#proposal-{m['again'].pk}")

    again.get_by_role("button", name=f"Reject as duplicate of #{m['leila'].pk}").click()

    expect(page.get_by_role("status")).to_contain_text(f"as a duplicate of #{m['leila'].pk}")
    m["again"].refresh_from_db()
    assert m["again"].status == Memory.Status.REJECTED
    assert f"Duplicate of memory {m['leila'].pk}" in m["again"].events.last().reason

    page.locator("[data-undo]").get_by_role("button", name="Undo").click()

    expect(page.get_by_role("status")).to_contain_text("Restored")
    expect(page.locator(f"#proposal-{m['again'].pk}")).to_be_visible()
    m["again"].refresh_from_db()
    assert m["again"].status == Memory.Status.PROPOSED


def test_it_confirms_alongside(page, live_server, owner):
    m = conflicts(owner)
    page.goto(f"{live_server.url}/queue/")
    page.locator(f"#proposal-{m['window'].pk}").get_by_role(
        "button", name="Confirm alongside"
    ).click()
    expect(page.get_by_role("status")).to_contain_text("Confirmed “Prefers a window seat")
    m["aisle"].refresh_from_db()
    m["window"].refresh_from_db()
    assert (m["aisle"].status, m["window"].status) == ("active", "active")


def test_it_asks_before_rejecting_selected_proposals(page, live_server, owner):
    first, second, third = (
        Memory.propose(owner, f"Olivia fact number {n}.", Memory.Type.SEMANTIC) for n in range(3)
    )
    page.goto(f"{live_server.url}/queue/")
    page.get_by_label(f"Select memory {first.pk}").check()
    page.get_by_label(f"Select memory {second.pk}").check()

    page.get_by_role("button", name="Reject selected…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Reject 2 proposals?")
    dialog.get_by_role("button", name="Cancel").click()
    assert set(Memory.objects.filter(owner=owner).values_list("status", flat=True)) == {"proposed"}

    page.get_by_role("button", name="Reject selected…").click()
    page.get_by_role("dialog").get_by_role("button", name="Reject 2").click()

    expect(page.get_by_role("status")).to_contain_text("Rejected 2 memories.")
    statuses = {m.pk: m.status for m in Memory.objects.filter(owner=owner)}
    assert statuses == {first.pk: "rejected", second.pk: "rejected", third.pk: "proposed"}
    # The selection was used up: nothing is ticked after the reload.
    expect(page.locator("[data-select]:checked")).to_have_count(0)


def test_it_asks_before_rejecting_selected_proposals_without_javascript(
    browser, live_server, owner
):
    first, second = (
        Memory.propose(owner, f"Olivia fact number {n}.", Memory.Type.SEMANTIC) for n in range(2)
    )
    page = new_page(browser, javascript=False)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/queue/")
    page.get_by_label(f"Select memory {first.pk}").check()
    page.get_by_label(f"Select memory {second.pk}").check()
    page.get_by_role("button", name="Reject selected…").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Reject 2 proposals?")
    assert Memory.objects.filter(owner=owner, status="rejected").count() == 0
    screenshot(page, "queue-bulk-reject-confirm")
    page.get_by_role("button", name="Reject 2").click()

    expect(page.get_by_role("status")).to_contain_text("Rejected 2 memories.")
    assert Memory.objects.filter(owner=owner, status="rejected").count() == 2
    page.context.close()


def test_it_restores_a_rejected_memory_from_its_page(page, live_server, owner):
    memory = Memory.propose(owner, "Olivia has a cat named Miso.", Memory.Type.SEMANTIC)
    memory.reject(actor=owner, reason="no cat")
    page.goto(f"{live_server.url}/memories/{memory.pk}/")

    page.get_by_role("button", name="Restore to the queue").click()

    expect(page.get_by_role("status")).to_contain_text("Restored “Olivia has a cat named Miso.”")
    expect(page.locator(".event-log, table").filter(has_text="Restored")).not_to_have_count(0)
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator(f"#proposal-{memory.pk}")).to_be_visible()


def test_it_keeps_the_keyboard_after_a_checkbox_click_and_the_selection_on_reload(
    page, live_server, owner
):
    first, second, third = (
        Memory.propose(owner, f"Olivia fact number {n}.", Memory.Type.SEMANTIC) for n in range(3)
    )
    page.goto(f"{live_server.url}/queue/")
    page.get_by_label(f"Select memory {second.pk}").click()
    expect(page.locator("[data-selected-count]")).to_have_text("1 of 3 selected")

    # The click made the second proposal current; the keys work from the checkbox.
    page.keyboard.press("k")
    expect(page.locator(f"#proposal-{first.pk}")).to_have_class(re.compile("is-current"))
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator(f"#proposal-{third.pk}")).to_have_class(re.compile("is-current"))

    page.reload()
    expect(page.get_by_label(f"Select memory {second.pk}")).to_be_checked()
    expect(page.locator("[data-selected-count]")).to_have_text("1 of 3 selected")

    page.get_by_label(f"Select memory {first.pk}").click()
    page.keyboard.press("c")
    expect(page.get_by_role("status")).to_contain_text("Confirmed “Olivia fact number")
    assert Memory.objects.filter(owner=owner, status="active").count() == 1
    # The remaining selection is still there after the action's reload.
    expect(page.get_by_label(f"Select memory {second.pk}")).to_be_checked()


def test_it_edits_then_confirms_and_comes_back_to_the_next_proposal(page, live_server, owner):
    first, second = (
        Memory.propose(owner, f"Olivia fact number {n}.", Memory.Type.SEMANTIC) for n in range(2)
    )
    page.goto(f"{live_server.url}/queue/")
    page.keyboard.press("j")
    page.keyboard.press("e")
    page.get_by_label("Content").fill("Olivia fact number zero, edited.")
    page.get_by_role("button", name="Save and confirm").click()

    expect(page).to_have_url(f"{live_server.url}/queue/")
    expect(page.get_by_role("status")).to_contain_text("Confirmed your edited version")
    expect(page.locator(f"#proposal-{second.pk}")).to_have_class(re.compile("is-current"))
    edited = Memory.objects.get(content="Olivia fact number zero, edited.")
    assert (edited.confidence, edited.source) == (1.0, "page")


def test_it_fits_the_first_proposal_near_the_top_of_a_phone(browser, live_server, owner):
    m = conflicts(owner)
    context = browser.new_context(
        viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=2, locale="en-GB"
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    log_in(page, live_server)
    page.goto(f"{live_server.url}/queue/")
    # The script has run (it shows the hints on other screens).
    page.wait_for_function("document.documentElement.classList.contains('js')")

    header = page.locator("header.topbar").bounding_box()
    first = page.locator("[data-proposal]").first.bounding_box()
    assert header["height"] <= 100, header
    assert first["y"] <= 0.35 * PHONE["height"], first
    expect(page.locator("[data-keyboard-hints]")).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    expect(page.locator(f"#proposal-{m['window'].pk} .relation-badge")).to_be_visible()
    docs_screenshot(page, "queue-conflict-phone", full_page=False)
    context.close()


def test_it_shows_keyboard_hints_with_a_mouse(page, live_server, owner):
    Memory.propose(owner, "Olivia likes jazz.", Memory.Type.PREFERENCE)
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator("[data-keyboard-hints]")).to_be_visible()
