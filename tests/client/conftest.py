"""The client's tests talk to a real running service (tests/client/service.py)."""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.client.service import RunningService, ScriptedExtractionLLM
from tests.fakes.fixtures import fake_openai  # noqa: F401  (the chat model's fake)
from timothy_client import Memory

# Extractions a client queues on disk go to a folder of this run's, not ~/.cache.
os.environ.setdefault("TIMOTHY_CLIENT_QUEUE_DIR", tempfile.mkdtemp(prefix="timothy-queue-"))


@pytest.fixture(scope="package")
def extraction_llm() -> ScriptedExtractionLLM:
    """The scripted fake the service's extraction asks."""
    llm = ScriptedExtractionLLM().start()
    yield llm
    llm.stop()


@pytest.fixture(scope="package")
def timothy(extraction_llm) -> RunningService:
    """The running service these tests share; its owner ``owner`` and token are on it."""
    service = RunningService(llm_base_url=extraction_llm.base_url).start()
    yield service
    service.remove()


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
