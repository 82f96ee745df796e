"""Fixtures of tests/memories: the fake OpenAI-compatible server, and the API
clients of tests/api for the tests that redact over real HTTP."""

from tests.api.conftest import alice_api, alice_token, make_api  # noqa: F401
from tests.fakes.fixtures import fake_llm, fake_openai, openai_embeddings  # noqa: F401
