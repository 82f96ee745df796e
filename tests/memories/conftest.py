from tests.fakes.fixtures import fake_llm, fake_openai, openai_embeddings  # noqa: F401
