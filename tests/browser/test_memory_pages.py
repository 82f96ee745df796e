from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from memories.models import Memory
from tests.base import make_memory
from tests.browser.conftest import PHONE, log_in, new_page, screenshot

pytestmark = pytest.mark.browser


def seed(owner) -> Memory:
    """A small store: a merged chain, an edited chain, a proposal, an archived memory."""
    now = timezone.now()
    tea = make_memory(
        owner, "Olivia likes green tea.", entities=["Olivia"], created_at=now - timedelta(days=60)
    )
    morning = make_memory(
        owner,
        "Olivia drinks tea every morning.",
        entities=["Olivia"],
        created_at=now - timedelta(days=45),
    )
    merged = Memory.merge([tea, morning], "Olivia drinks green tea every morning.", actor=owner)
    porto = make_memory(
        owner,
        "Olivia lives in Porto.",
        entities=["Olivia", "Porto"],
        created_at=now - timedelta(days=120),
    )
    porto.supersede(
        "Olivia lives in Lisbon.",
        entities=["Olivia", "Lisbon"],
        actor=owner,
        via="page",
        reason="moved",
    )
    make_memory(
        owner,
        "Olivia worked at Acme.",
        Memory.Type.EPISODIC,
        status="archived",
        created_at=now - timedelta(days=400),
    )
    Memory.propose(
        owner,
        "Olivia is learning Portuguese.",
        Memory.Type.SEMANTIC,
        entities=["Olivia"],
        source=Memory.Source.EXTRACTION,
        session_id="s-9",
    )
    return merged


def test_it_shows_home_and_the_memory_browser(page, live_server, owner):
    seed(owner)
    page.goto(f"{live_server.url}/")
    expect(page.locator(".stat-queue .stat-number")).to_have_text("1")
    expect(page.get_by_role("link", name="Queue 1 waiting")).to_be_visible()
    expect(page.locator(".events")).to_contain_text("Merged")
    screenshot(page, "home")

    page.get_by_role("link", name="Memories", exact=True).click()
    # The list opens on the active memories; the status is a tab.
    expect(page.locator('[data-status-tab="active"]')).to_have_attribute("aria-current", "page")
    page.get_by_label("Entity").fill("lisbon")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator(".memories-table tbody tr")).to_have_count(1)
    expect(page.locator(".memories-table")).to_contain_text("Olivia lives in Lisbon.")
    page.get_by_role("link", name="Clear").click()
    page.locator('[data-status-tab="all"]').click()
    expect(page.locator(".memories-table tbody tr")).to_have_count(7)
    screenshot(page, "memory-list")


def test_it_shows_a_merge_and_archives_after_asking(page, live_server, owner):
    merged = seed(owner)
    page.goto(f"{live_server.url}/memories/{merged.pk}/")
    expect(page.get_by_label("Merged from 2 memories")).to_be_visible()
    expect(page.locator(".merge-source")).to_have_count(2)

    page.get_by_role("link", name="Archive…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Archive this memory?")
    page.get_by_role("link", name="Keep it").click()
    merged.refresh_from_db()
    assert merged.status == Memory.Status.ACTIVE

    page.get_by_role("link", name="Archive…").click()
    page.get_by_label("Reason (optional)").fill("no longer true")
    page.get_by_role("button", name="Archive").click()
    expect(page.get_by_role("status")).to_contain_text("Archived")
    expect(page.locator(".notice")).to_contain_text("Archived: kept on record")
    screenshot(page, "chain-merge-archived")
    merged.refresh_from_db()
    assert merged.status == Memory.Status.ARCHIVED


def test_it_works_without_javascript(browser, live_server, owner):
    proposal = Memory.propose(owner, "Olivia runs on Sundays.", Memory.Type.EPISODIC)
    active = make_memory(owner, "Olivia has a bike.")
    page = new_page(browser, javascript=False)
    log_in(page, live_server)

    page.goto(f"{live_server.url}/queue/")
    expect(page.get_by_text("Keyboard:")).to_be_hidden()
    page.locator(f"#proposal-{proposal.pk}").get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status")).to_contain_text("Confirmed “Olivia runs on Sundays.”")
    expect(page.get_by_role("heading", name="All caught up")).to_be_visible()

    page.goto(f"{live_server.url}/memories/{active.pk}/")
    page.get_by_role("link", name="Archive…").click()
    expect(page.get_by_role("heading", name="Archive this memory?")).to_be_visible()
    page.get_by_label("Reason (optional)").fill("sold it")
    page.get_by_role("button", name="Archive", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Archived")
    screenshot(page, "no-javascript-archived")
    page.context.close()

    proposal.refresh_from_db()
    active.refresh_from_db()
    assert proposal.status == Memory.Status.ACTIVE
    assert active.status == Memory.Status.ARCHIVED
    assert active.events.last().reason == "sold it"


def test_it_fits_a_phone(browser, live_server, owner):
    merged = seed(owner)
    page = new_page(browser, viewport=PHONE)
    log_in(page, live_server)
    for name, path in [
        ("phone-home", "/"),
        ("phone-queue", "/queue/"),
        ("phone-memory-list", "/memories/"),
        ("phone-chain", f"/memories/{merged.pk}/"),
        ("phone-tokens", "/tokens/"),
        ("phone-inspector", "/inspect/"),
    ]:
        page.goto(f"{live_server.url}{path}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px"
        screenshot(page, name)
    page.context.close()
