"""The Tokens page at laptop width: a token with only the read scope, then paused and resumed."""

import pytest
import requests
from playwright.sync_api import expect

from memories.models import ApiToken
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


def test_it_creates_a_read_only_token_and_pauses_and_resumes_it(page, live_server, owner):
    page.goto(f"{live_server.url}/tokens/")
    page.get_by_label("Token name").fill("reader")
    page.get_by_role("checkbox", name="propose").uncheck()
    page.get_by_role("checkbox", name="write").uncheck()
    page.get_by_role("button", name="Create token").click()

    raw = page.get_by_role("textbox", name="New token").input_value()
    row = page.locator('[data-token-row="reader"]')
    expect(row.locator("[data-token-scopes]")).to_have_text("read")
    assert ApiToken.objects.get(owner=owner).scopes == ["read"]

    def api_status() -> int:
        return requests.get(
            f"{live_server.url}/v1/memories",
            headers={"Authorization": f"Bearer {raw}"},
            timeout=30,
        ).status_code

    assert api_status() == 200

    page.get_by_role("button", name="Pause reader").click()
    expect(page.get_by_role("status")).to_contain_text("Paused the token “reader”")
    expect(row).to_contain_text("Paused")
    pause_button = row.get_by_role("button", name="Resume reader")
    expect(pause_button).to_be_visible()
    # The two actions sit side by side within the row.
    revoke_box = row.get_by_role("button", name="Revoke reader").bounding_box()
    resume_box = pause_button.bounding_box()
    assert abs(revoke_box["y"] - resume_box["y"]) < 4
    # ... and inside the card: the table does not need scrolling sideways.
    assert page.locator(".table-wrap").evaluate("el => el.scrollWidth <= el.clientWidth")
    screenshot(page, "token-paused")
    assert api_status() == 403

    pause_button.click()
    expect(page.get_by_role("status")).to_contain_text("Resumed the token “reader”")
    expect(row).to_contain_text("Live")
    assert api_status() == 200
