"""The MCP server's tests: the SDK's own client, against a real running service."""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.client.service import RunningService

# Extractions a client queues on disk go to a folder of this run's, not ~/.cache.
os.environ.setdefault("TIMOTHY_CLIENT_QUEUE_DIR", tempfile.mkdtemp(prefix="timothy-queue-"))


@pytest.fixture(scope="package")
def timothy() -> RunningService:
    """A running service for these tests (extraction is not needed here)."""
    service = RunningService().start()
    yield service
    service.remove()


@pytest.fixture(scope="module")
def owner(timothy) -> tuple[str, str]:
    """A fresh owner (username, token): list_pending shows only this module's proposals."""
    return timothy.new_owner()
