"""What a memory is about, on the owner's pages, in a real Chromium at laptop and
phone widths: the queue offers as an update only a memory about the same subject
and aspect (another person's is "see also", with no action), an edit is
confirmed as the new version of #N in one step, two copies of one fact in the
queue are one card settled by one click, and the owner's correction of the
about (or the LLM's reading) shows on the pages and in the API's memory JSON.

The test settings have no embedding provider: the related memories are judged
by what each is about, entities and words.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memories.models import ApiToken, Memory
from tests.base import make_memory
from tests.browser.conftest import LAPTOP, PHONE, log_in, new_page, screenshot

pytestmark = pytest.mark.browser

VIEWPORTS = pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])

NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth - window.innerWidth"


def open_page(browser, live_server, viewport):
    page = new_page(browser, viewport=viewport)
    log_in(page, live_server)
    return page


def porto(owner) -> dict[str, Memory]:
    """The owner moved to Porto; the brother has lived there all along."""
    lisbon = make_memory(owner, "Lives in Lisbon.")
    brother = make_memory(owner, "My brother lives in Porto.")
    proposal = Memory.propose(
        owner, "Lives in Porto now.", Memory.Type.SEMANTIC, source=Memory.Source.EXTRACTION
    )
    return {"lisbon": lisbon, "brother": brother, "proposal": proposal}


@VIEWPORTS
def test_it_offers_the_owners_home_as_the_update_and_the_brothers_only_as_see_also(
    browser, live_server, owner, viewport
):
    m = porto(owner)
    page = open_page(browser, live_server, viewport)
    page.goto(f"{live_server.url}/queue/")
    card = page.locator(f"#proposal-{m['proposal'].pk}")
    expect(card.locator("[data-about]").first).to_have_text("about you · home")

    update = card.locator(".related-item[data-related]")
    expect(update).to_have_count(1)
    expect(update).to_have_attribute("data-relation", "update")
    expect(update.get_by_role("link", name=f"#{m['lisbon'].pk}", exact=True)).to_be_visible()
    expect(update).to_contain_text("about you · home")
    lisbon, brother = m["lisbon"].pk, m["brother"].pk
    expect(card.get_by_role("button", name=f"Confirm as new version of #{lisbon}")).to_be_visible()

    # The brother's memory: only under "See also", folded, and with no action.
    see_also = card.locator("[data-see-also]")
    expect(see_also).to_have_count(1)
    expect(see_also.locator("[data-relation=see_also]")).to_have_count(1)
    see_also.locator("summary").click()
    item = see_also.locator("[data-relation=see_also]")
    expect(item.get_by_role("link", name=f"#{brother}", exact=True)).to_be_visible()
    expect(item).to_contain_text("about you, not your brother")
    expect(see_also.locator("button, form")).to_have_count(0)
    expect(card.get_by_role("button", name=f"new version of #{brother}")).to_have_count(0)
    expect(card.get_by_role("button", name=f"duplicate of #{brother}")).to_have_count(0)
    expect(card.get_by_role("link", name=f"new version of #{brother}")).to_have_count(0)
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"queue-about-see-also-{viewport['width']}")

    card.get_by_role("button", name=f"Confirm as new version of #{lisbon}").click()

    expect(page.get_by_role("status")).to_contain_text(f"as the new version of #{lisbon}")
    m["lisbon"].refresh_from_db()
    m["brother"].refresh_from_db()
    assert m["lisbon"].superseded_by_id == m["proposal"].pk
    assert m["brother"].status == Memory.Status.ACTIVE
    page.context.close()


@VIEWPORTS
def test_it_confirms_an_edit_as_the_new_version_of_n_in_one_step(
    browser, live_server, owner, viewport
):
    m = porto(owner)
    lisbon = m["lisbon"].pk
    page = open_page(browser, live_server, viewport)
    page.goto(f"{live_server.url}/queue/")
    page.locator(f"#proposal-{m['proposal'].pk}").get_by_role(
        "link", name=f"Edit, then confirm as new version of #{lisbon}"
    ).click()

    # The link chose the memory to replace; the brother's is no choice.
    confirm_as = page.locator("[data-replaces]")
    expect(
        confirm_as.get_by_label(f"the new version of #{lisbon}: Lives in Lisbon.")
    ).to_be_checked()
    expect(confirm_as.get_by_label("a new memory, beside the others")).not_to_be_checked()
    expect(confirm_as.locator("input[type=radio]")).to_have_count(2)
    about = page.locator("fieldset.about-fields")
    expect(about.get_by_label("About whom or what")).to_have_value("you")
    expect(about.get_by_label("Which is")).to_have_value("self")
    expect(about.get_by_label("Aspect")).to_have_value("home")
    # Styled at every width (the about rules once sat inside the phones' media query).
    assert about.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
    assert about.locator("legend").evaluate("e => getComputedStyle(e).fontWeight") == "600"
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"edit-confirm-as-{viewport['width']}")

    # Every field of the form is reached with the keyboard, in reading order;
    # in the radio group, Tab lands on the chosen one.
    page.get_by_label("Content").focus()
    reached = []
    for _ in range(12):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.id || document.activeElement.name"))
    order = [
        "id_about_subject",
        "id_about_kind",
        "id_about_aspect",
        "id_about_occasion",
        "id_replaces_1",
        "id_reason",
    ]
    assert [name for name in reached if name in order] == order, reached

    page.get_by_label("Content").fill("Lives in Porto now, near the river.")
    page.get_by_role("button", name="Save and confirm").click()

    expect(page.get_by_role("status")).to_contain_text(f"as the new version of #{lisbon}")
    m["lisbon"].refresh_from_db()
    new = m["lisbon"].superseded_by
    assert m["lisbon"].status == Memory.Status.SUPERSEDED
    assert new is not None and new.status == Memory.Status.ACTIVE
    assert new.content == "Lives in Porto now, near the river."

    page.goto(f"{live_server.url}/memories/{new.pk}/")
    expect(page.locator(f"[data-replaces='{lisbon}']")).to_contain_text(f"Replaces #{lisbon}")
    expect(page.locator(f"#version-{lisbon} .badge.status")).to_have_text("Superseded")
    # Each version says what it is about, the brother's memory is no part of it.
    expect(page.locator(f"#version-{lisbon} [data-about]")).to_have_text("about you · home")
    expect(page.locator(f"#version-{new.pk} [data-about]")).to_have_text("about you · home")
    expect(page.locator(f"#version-{m['brother'].pk}")).to_have_count(0)
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"chain-replaces-{viewport['width']}")
    page.context.close()


def copies(owner) -> tuple[Memory, Memory]:
    first = Memory.propose(owner, "Is allergic to peanuts.", Memory.Type.SEMANTIC)
    second = Memory.propose(owner, "Is allergic to peanuts", Memory.Type.SEMANTIC)
    return first, second


@VIEWPORTS
def test_it_shows_two_copies_in_one_card_and_settles_both_with_one_click(
    browser, live_server, owner, viewport
):
    first, second = copies(owner)
    page = open_page(browser, live_server, viewport)
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator("[data-proposal]")).to_have_count(1)
    card = page.locator(f"#proposal-{first.pk}")
    expect(card.locator("[data-copies]")).to_contain_text("Also waiting, the same fact")
    expect(card.locator(f"[data-copy='{second.pk}']")).to_contain_text("Is allergic to peanuts")
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"queue-copies-{viewport['width']}")

    card.get_by_role("button", name="Confirm", exact=True).click()

    expect(page.get_by_role("status")).to_contain_text("and rejected 1 copy of it")
    expect(page.locator("[data-proposal]")).to_have_count(0)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (Memory.Status.ACTIVE, Memory.Status.REJECTED)
    assert second.events.last().reason.startswith(f"Duplicate of memory {first.pk}")

    # The rejected copy can be put back.
    page.locator("[data-undo]").get_by_role("button", name="Undo").click()
    expect(page.get_by_role("status")).to_contain_text("Restored")
    second.refresh_from_db()
    assert second.status == Memory.Status.PROPOSED
    page.context.close()


def test_editing_a_proposal_then_confirming_it_rejects_its_copies_too(page, live_server, owner):
    first, second = copies(owner)
    page.goto(f"{live_server.url}/queue/")
    page.locator(f"#proposal-{first.pk}").get_by_role("link", name="Edit, then confirm").click()

    expect(page.locator("[data-copies]")).to_contain_text(f"#{second.pk} Is allergic to peanuts")
    page.get_by_label("Content").fill("Is allergic to peanuts and to cashews.")
    page.get_by_role("button", name="Save and confirm").click()

    expect(page.get_by_role("status").first).to_contain_text("Also rejected 1 copy of it")
    expect(page.locator("[data-proposal]")).to_have_count(0)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == Memory.Status.SUPERSEDED
    assert first.superseded_by.status == Memory.Status.ACTIVE
    assert second.status == Memory.Status.REJECTED
    assert second.events.last().reason.startswith(f"Duplicate of memory {first.superseded_by_id}")


def test_rejecting_a_proposal_rejects_its_copies_and_one_undo_restores_both(
    page, live_server, owner
):
    first, second = copies(owner)
    page.goto(f"{live_server.url}/queue/")
    page.locator(f"#proposal-{first.pk}").get_by_role("button", name="Reject").click()

    expect(page.locator("[data-proposal]")).to_have_count(0)
    expect(page.locator("[data-undo]")).to_contain_text("Rejected 2 memories.")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (Memory.Status.REJECTED, Memory.Status.REJECTED)

    page.locator("[data-undo]").get_by_role("button", name="Undo").click()

    expect(page.get_by_role("status")).to_contain_text("Restored 2 memories")
    expect(page.locator("[data-proposal]")).to_have_count(1)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (Memory.Status.PROPOSED, Memory.Status.PROPOSED)


@VIEWPORTS
def test_confirming_selected_proposals_rejects_their_copies_too(
    browser, live_server, owner, viewport
):
    first, second = copies(owner)
    other = Memory.propose(owner, "Plays the cello.", Memory.Type.SEMANTIC)
    page = open_page(browser, live_server, viewport)
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator("[data-proposal]")).to_have_count(2)
    page.locator(f"#select-{first.pk}").check()
    page.locator(f"#select-{other.pk}").check()
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    page.get_by_role("button", name="Confirm selected").click()

    expect(page.get_by_role("status").first).to_contain_text(
        "Confirmed 2 memories and rejected 1 copy of them."
    )
    expect(page.locator("[data-proposal]")).to_have_count(0)
    for memory in (first, second, other):
        memory.refresh_from_db()
    assert (first.status, second.status, other.status) == (
        Memory.Status.ACTIVE,
        Memory.Status.REJECTED,
        Memory.Status.ACTIVE,
    )
    assert second.events.last().reason.startswith(f"Duplicate of memory {first.pk}")

    # The copy rejected along the way can be put back.
    page.locator("[data-undo]").get_by_role("button", name="Undo").click()
    expect(page.get_by_role("status")).to_contain_text("Restored")
    second.refresh_from_db()
    assert second.status == Memory.Status.PROPOSED
    page.context.close()


@VIEWPORTS
def test_the_owners_correction_of_the_about_shows_on_the_pages_and_in_the_api(
    browser, live_server, owner, viewport
):
    memory = make_memory(owner, "Lives in Porto.")
    token, secret = ApiToken.issue(owner, "assistant")
    page = open_page(browser, live_server, viewport)
    page.goto(f"{live_server.url}/memories/{memory.pk}/")
    expect(page.locator(".facts [data-about]")).to_have_text("you · home")
    page.get_by_role("link", name="Edit (new version)").click()

    about = page.locator("fieldset.about-fields")
    about.get_by_label("About whom or what").fill("brother")
    about.get_by_label("Which is").select_option("person")
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"edit-about-{viewport['width']}")
    page.get_by_role("button", name="Save new version").click()

    memory.refresh_from_db()
    new = memory.superseded_by
    assert new is not None
    page.wait_for_url(f"**/memories/{new.pk}/")
    expect(page.locator(".facts [data-about]")).to_have_text("your brother · home (set by you)")
    expect(page.locator(f"#version-{new.pk} [data-about]")).to_have_text(
        "about your brother · home (set by you)"
    )
    expect(page.locator(f"#version-{memory.pk} [data-about]")).to_have_text("about you · home")
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"detail-about-owner-{viewport['width']}")

    page.goto(f"{live_server.url}/memories/")
    row = page.locator("tr", has=page.get_by_role("link", name="Lives in Porto.")).filter(
        has=page.locator(".status-active")
    )
    expect(row.locator("[data-about]")).to_have_text("about your brother · home")
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"list-about-{viewport['width']}")

    # The API's memory JSON (each version of the chain) carries it.
    response = page.request.get(
        f"{live_server.url}/v1/memories/{new.pk}/chain",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status == 200
    abouts = {version["id"]: version["about"] for version in response.json()["memories"]}
    assert abouts[new.pk] == {
        "subject": "brother",
        "kind": "person",
        "aspect": "home",
        "occasion": "",
        "set_by": "owner",
    }
    assert abouts[memory.pk]["set_by"] == "rules"
    assert abouts[memory.pk]["kind"] == "self"
    page.context.close()


@VIEWPORTS
def test_an_about_the_llm_read_says_so_on_the_detail_page(browser, live_server, owner, viewport):
    memory = make_memory(
        owner,
        "Sarah took over as head of my team in May 2026.",
        Memory.Type.EPISODIC,
        about_subject="self",
        about_kind="self",
        about_aspect="manager",
        about_occasion="2026-05",
        about_set_by="llm",
    )
    page = open_page(browser, live_server, viewport)
    page.goto(f"{live_server.url}/memories/{memory.pk}/")
    expect(page.locator(".facts [data-about]")).to_have_text(
        "you · manager · 2026-05 (read by the LLM)"
    )
    expect(page.locator(f"#version-{memory.pk} [data-about]")).to_have_text(
        "about you · manager · 2026-05 (read by the LLM)"
    )
    assert page.evaluate(NO_SIDEWAYS_SCROLL) <= 0
    screenshot(page, f"detail-about-llm-{viewport['width']}")
