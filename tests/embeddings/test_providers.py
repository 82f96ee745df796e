from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval.embeddings import (
    EmbeddingError,
    LocalEmbeddingProvider,
    OpenAIEmbeddingProvider,
    default_local_model_path,
    get_provider,
)
from tests.fakes.openai_server import EMBEDDINGS, Answer, deterministic_vector


def test_it_has_no_provider_when_set_to_none(settings):
    settings.EMBEDDING_PROVIDER = "none"
    assert get_provider() is None


def test_it_refuses_an_unknown_provider(settings):
    settings.EMBEDDING_PROVIDER = "magic"
    with pytest.raises(ImproperlyConfigured, match="none, openai, local"):
        get_provider()


def test_it_builds_the_provider_once_per_settings(openai_embeddings, settings):
    first = get_provider()
    assert get_provider() is first
    settings.EMBEDDING_TIMEOUT = 1.5
    second = get_provider()
    assert second is not first
    assert isinstance(second, OpenAIEmbeddingProvider)
    assert second.timeout == 1.5


def test_it_embeds_in_batches_in_order(openai_embeddings, settings):
    settings.EMBEDDING_BATCH_SIZE = 2
    texts = ["one", "two", "three", "four", "five"]
    vectors = get_provider().embed(texts)
    assert vectors == [deterministic_vector(text, 384) for text in texts]
    sent = openai_embeddings.requests_to(EMBEDDINGS)
    assert [request.json["input"] for request in sent] == [
        ["one", "two"],
        ["three", "four"],
        ["five"],
    ]
    assert sent[0].headers["Authorization"] == "Bearer sk-test"
    assert sent[0].json["model"] == "text-embedding-3-small"
    assert sent[0].json["dimensions"] == 384


def test_it_asks_older_models_for_no_dimensions(openai_embeddings, settings):
    settings.EMBEDDING_MODEL = "nomic-embed-text"
    get_provider().embed(["hello"])
    assert "dimensions" not in openai_embeddings.requests_to(EMBEDDINGS)[0].json


def test_it_retries_on_429(openai_embeddings):
    openai_embeddings.queue(
        EMBEDDINGS,
        Answer(status=429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
    )
    assert get_provider().embed(["hello"]) == [deterministic_vector("hello", 384)]
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 2


def test_it_retries_on_5xx(openai_embeddings):
    openai_embeddings.queue(
        EMBEDDINGS,
        Answer(status=502, body="bad gateway", headers={"Retry-After": "0"}),
        Answer(status=503, body="unavailable", headers={"Retry-After": "0"}),
    )
    assert len(get_provider().embed(["hello"])) == 1
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 3


def test_it_does_not_retry_on_400(openai_embeddings):
    openai_embeddings.queue(EMBEDDINGS, Answer(status=400, json={"error": {"message": "bad"}}))
    with pytest.raises(EmbeddingError, match="400"):
        get_provider().embed(["hello"])
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 1


def test_it_gives_up_after_the_last_retry(openai_embeddings, settings):
    settings.EMBEDDING_MAX_RETRIES = 2
    failure = Answer(status=500, body="boom", headers={"Retry-After": "0"})
    openai_embeddings.queue(EMBEDDINGS, failure, failure, failure, failure)
    with pytest.raises(EmbeddingError, match="500"):
        get_provider().embed(["hello"])
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 3


def test_it_times_out_on_a_slow_provider(openai_embeddings):
    openai_embeddings.queue(EMBEDDINGS, Answer(json={"data": []}, delay=2.0))
    with pytest.raises(EmbeddingError, match="timed out"):
        get_provider().embed(["hello"], timeout=0.3)


def test_it_does_not_retry_past_the_timeout(openai_embeddings):
    openai_embeddings.queue(EMBEDDINGS, Answer(status=429, body="{}", headers={"Retry-After": "5"}))
    with pytest.raises(EmbeddingError, match="no time left"):
        get_provider().embed(["hello"], timeout=1.0)
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 1


@pytest.mark.parametrize(
    "answer",
    [
        Answer(body="{not json"),
        Answer(json={"data": "nope"}),
        Answer(json={"data": [{"index": 0, "embedding": [0.1, 0.2]}]}),
        Answer(json={"data": []}),
    ],
    ids=["not-json", "no-list", "wrong-dimension", "too-few"],
)
def test_it_rejects_unusable_answers(openai_embeddings, answer):
    openai_embeddings.queue(EMBEDDINGS, answer)
    with pytest.raises(EmbeddingError):
        get_provider().embed(["hello"])


def test_it_reports_an_unreachable_provider(openai_embeddings, settings):
    settings.EMBEDDING_BASE_URL = "http://127.0.0.1:9/v1"
    with pytest.raises(EmbeddingError, match="failed"):
        get_provider().embed(["hello"])


def test_it_refuses_a_local_folder_without_a_model(settings, tmp_path):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = str(tmp_path)
    with pytest.raises(ImproperlyConfigured, match="TIMOTHY_EMBEDDING_MODEL"):
        get_provider()


def test_it_uses_the_packaged_model_by_default(settings):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    provider = get_provider()
    assert isinstance(provider, LocalEmbeddingProvider)
    assert provider.model_path == default_local_model_path()


def test_a_bulk_job_may_ask_for_more_threads_than_the_service_uses(settings):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    settings.EMBEDDING_THREADS = 1
    service = get_provider()
    bulk = get_provider(threads=2)
    assert (service.threads, bulk.threads) == (1, 2)
    assert get_provider(threads=2) is bulk
    assert get_provider() is service


def test_it_reads_the_local_dimension_without_loading_the_model():
    provider = LocalEmbeddingProvider(default_local_model_path(), batch_size=8)
    assert provider.dimensions == 384
    assert provider._model is None
