"""The client's tests talk to a real running service (tests/client/service.py)."""

from __future__ import annotations

import pytest

from tests.client.service import RunningService, shared_service, stop_shared_service
from tests.fakes.fixtures import fake_openai  # noqa: F401  (the chat model's fake)
from timothy_client import Memory


@pytest.fixture(scope="session")
def timothy(tmp_path_factory) -> RunningService:
    """The shared running service; its owner ``owner`` and token are on it."""
    service, _ = shared_service(tmp_path_factory.mktemp("timothy-service"))
    yield service
    stop_shared_service()


@pytest.fixture(scope="session")
def extraction_llm(timothy):
    """The scripted fake the shared service's extraction asks."""
    _, llm = shared_service(timothy.data_dir)
    return llm


@pytest.fixture
def memory(timothy) -> Memory:
    """A client for the shared owner, with a generous recall timeout (a loaded machine)."""
    client = Memory(
        timothy.public_url,
        timothy.token,
        timeout=30,
        internal_url=timothy.internal_url,
        service_token=timothy.service_token,
        owner=timothy.owner,
    )
    yield client
    client.close()


@pytest.fixture
def fresh_memory(timothy) -> Memory:
    """A client for a new owner who has no memories yet."""
    owner, token = timothy.new_owner()
    client = Memory(
        timothy.public_url,
        token,
        timeout=30,
        internal_url=timothy.internal_url,
        service_token=timothy.service_token,
        owner=owner,
    )
    yield client
    client.close()
