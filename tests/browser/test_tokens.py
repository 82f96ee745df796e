import pytest
from playwright.sync_api import expect

from memories.models import ApiToken
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


def test_it_creates_copies_and_revokes_a_token(page, live_server, owner):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.goto(f"{live_server.url}/tokens/")
    page.get_by_label("Token name").fill("kitchen assistant")
    page.get_by_role("button", name="Create token").click()

    raw = page.get_by_role("textbox", name="New token").input_value()
    token = ApiToken.objects.get(owner=owner)
    assert ApiToken.authenticate(raw) == token
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied ✓")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == raw
    screenshot(page, "token-created")

    page.reload()
    expect(page.get_by_role("textbox", name="New token")).to_have_count(0)

    page.get_by_role("button", name="Revoke kitchen assistant").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Anything using it stops working at once.")
    dialog.get_by_role("button", name="Revoke").click()
    expect(page.get_by_role("status")).to_contain_text("Revoked the token “kitchen assistant”")
    expect(page.locator('[data-token-row="kitchen assistant"]')).to_contain_text("Revoked")
    screenshot(page, "token-revoked")

    assert ApiToken.authenticate(raw) is None
