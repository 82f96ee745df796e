"""A valid token counts only under the Bearer scheme."""

from __future__ import annotations

import base64

import pytest

from tests.api.conftest import issue_token
from tests.api.test_auth import assert_unauthorized


@pytest.mark.parametrize(
    "header",
    [
        "Token {raw}",
        "Basic {raw}",
        "Basic {basic}",
        "Digest {raw}",
        "{raw}",
        "Bearer: {raw}",
        "Bearertm {raw}",
    ],
)
def test_it_refuses_a_valid_token_under_another_scheme(make_api, alice, header):
    raw = issue_token(alice)
    basic = base64.b64encode(f"alice:{raw}".encode()).decode()
    api = make_api()
    response = api.get(
        "/v1/memories", headers={"Authorization": header.format(raw=raw, basic=basic)}
    )
    assert_unauthorized(response)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_it_takes_the_same_token_under_bearer_in_any_case(make_api, alice, scheme):
    raw = issue_token(alice)
    response = make_api().get("/v1/memories", headers={"Authorization": f"{scheme} {raw}"})
    assert response.status_code == 200
