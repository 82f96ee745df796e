"""pytest fixtures around the fake OpenAI-compatible server."""

from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def fake_openai():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def openai_embeddings(fake_openai, settings):
    """Settings pointing the embedding provider at the fake server."""
    settings.EMBEDDING_PROVIDER = "openai"
    settings.EMBEDDING_BASE_URL = fake_openai.base_url
    settings.EMBEDDING_MODEL = "text-embedding-3-small"
    settings.EMBEDDING_API_KEY = "sk-test"
    settings.EMBEDDING_DIMENSIONS = 384
    settings.EMBEDDING_TIMEOUT = 2.0
    settings.EMBEDDING_BATCH_SIZE = 64
    settings.EMBEDDING_MAX_RETRIES = 3
    return fake_openai


@pytest.fixture
def fake_llm(fake_openai, settings):
    """Settings pointing the LLM client at the fake server."""
    settings.LLM_BASE_URL = fake_openai.base_url
    settings.LLM_API_KEY = "sk-test"
    settings.LLM_MODEL = "fake-model"
    settings.LLM_TIMEOUT = 2.0
    return fake_openai
