"""A search's ``as_of`` with a NUL byte (or any other control character) is a
400, wherever it sits: Python's ``datetime.fromisoformat`` stops reading at a
NUL, so "2026-01-01T00:00:00\\x00junk" would otherwise parse as that date."""

from __future__ import annotations

import pytest

SEARCH = "/v1/memories/search"


@pytest.mark.parametrize(
    "as_of",
    [
        "2026-01-01T00:00:00\x00",
        "2026-01-01T00:00:00+00:00\x00",
        "2026-01-01T00:00:00+00:00\x00and anything after it",
        "2026-01-01T00:00:00\x07",
        "\x002026-01-01T00:00:00",
    ],
)
def test_it_refuses_an_as_of_holding_a_control_character(alice_api, as_of):
    response = alice_api.post(SEARCH, {"query": "Which seat?", "as_of": as_of})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "as_of" in error["details"]


def test_it_still_takes_a_plain_as_of(alice_api):
    response = alice_api.post(
        SEARCH, {"query": "Which seat?", "as_of": "2026-01-01T00:00:00+00:00"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["as_of"].startswith("2026-01-01T00:00:00")
