"""The MCP server's tests: the SDK's own client, against a real running service."""

from __future__ import annotations

import pytest

from tests.client.service import RunningService, shared_service, stop_shared_service


@pytest.fixture(scope="session")
def timothy(tmp_path_factory) -> RunningService:
    """The running service the client tests share (started once for both folders)."""
    service, _ = shared_service(tmp_path_factory.mktemp("timothy-service"))
    yield service
    stop_shared_service()


@pytest.fixture(scope="module")
def owner(timothy) -> tuple[str, str]:
    """A fresh owner (username, token): list_pending shows only this module's proposals."""
    return timothy.new_owner()
