import re

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


def propose_three(owner) -> list[Memory]:
    return [
        Memory.propose(
            owner,
            "Olivia is vegetarian.",
            Memory.Type.PREFERENCE,
            entities=["Olivia"],
            confidence=0.8,
            source=Memory.Source.EXTRACTION,
            session_id="session-17",
        ),
        Memory.propose(
            owner,
            "Olivia's cat is called Biscuit.",
            Memory.Type.SEMANTIC,
            entities=["Olivia", "Biscuit"],
            confidence=0.55,
            source=Memory.Source.EXTRACTION,
            session_id="session-17",
        ),
        Memory.propose(
            owner,
            "Olivia prefers aisle seats on long flights.",
            Memory.Type.PREFERENCE,
            entities=["Olivia"],
            confidence=0.7,
            source=Memory.Source.EXTRACTION,
            session_id="session-18",
        ),
    ]


def test_it_confirms_rejects_and_edits_then_confirms(page, live_server, owner):
    vegetarian, cat, seats = propose_three(owner)
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator("[data-proposal]")).to_have_count(3)
    screenshot(page, "queue")

    page.locator(f"#proposal-{vegetarian.pk}").get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status").filter(has_text="Confirmed")).to_contain_text(
        "Olivia is vegetarian."
    )
    expect(page.locator("[data-proposal]")).to_have_count(2)

    cat_item = page.locator(f"#proposal-{cat.pk}")
    cat_item.get_by_label(re.compile("Reason for rejecting")).fill("I have no cat")
    cat_item.get_by_role("button", name="Reject", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Rejected")).to_contain_text("Biscuit")

    page.locator(f"#proposal-{seats.pk}").get_by_role("link", name="Edit, then confirm").click()
    page.get_by_label("Content").fill("Olivia prefers window seats on long flights.")
    page.get_by_role("button", name="Save and confirm").click()

    # Back in the queue (now empty), then to the new version's history.
    expect(page.get_by_role("status")).to_contain_text("Confirmed your edited version")
    expect(page).to_have_url(re.compile(r"/queue/$"))
    seats.refresh_from_db()
    page.goto(f"{live_server.url}/memories/{seats.superseded_by_id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Olivia prefers window seats on long flights."
    )
    expect(page.locator(".diff del")).to_have_text("aisle")
    expect(page.locator(".diff ins")).to_have_text("window")
    expect(page.locator(".version.is-head")).to_contain_text("Head")
    screenshot(page, "chain-after-edit")

    vegetarian.refresh_from_db()
    cat.refresh_from_db()
    seats.refresh_from_db()
    assert vegetarian.status == Memory.Status.ACTIVE
    assert cat.status == Memory.Status.REJECTED
    assert cat.events.last().reason == "I have no cat"
    assert seats.status == Memory.Status.SUPERSEDED
    assert seats.superseded_by.content == "Olivia prefers window seats on long flights."
