"""A fresh web worker answers recalls at once, without its vector leg until its
embedding model is loaded (timothy/warmup.py), instead of making the first
searches wait on the load. How soon, in seconds, `bench_cold_start` prints."""

from __future__ import annotations

import psutil
import pytest
import requests

from memories.related import MODEL_STILL_LOADING, find_related
from retrieval import embeddings
from retrieval.embeddings import MODEL_LOADING
from retrieval.recall import recall
from tests.base import make_memory
from tests.faults.conftest import api, remember
from timothy.drill import HTTP_TIMEOUT, ServeProcess, wait_for


def search(service: ServeProcess, session: requests.Session | None = None) -> dict:
    session = session or api(service)
    response = session.post(
        service.base + "/v1/memories/search",
        json={"query": "what does she drink in the morning"},
        timeout=HTTP_TIMEOUT,
    )
    assert response.status_code == 200, response.text
    return response.json()


def public_workers(service: ServeProcess) -> list[psutil.Process]:
    def public(process: psutil.Process) -> bool:
        try:
            return "timothy.wsgi:application" in process.cmdline()
        except psutil.Error:
            return False

    [master] = [p for p in service.children() if public(p) and not public(p.parent())]
    return [p for p in master.children() if public(p)]


def test_a_restarted_worker_answers_at_once_and_says_its_vector_leg_waits_for_the_model(
    start_service,
):
    service = start_service(TIMOTHY_EMBEDDING_PROVIDER="local")
    remember(service, "Drinks green tea every morning.")
    session = api(service)
    wait_for(
        lambda: search(service, session)["legs"]["vector"]["status"] == "ok",
        HTTP_TIMEOUT,
        "the worker's embedding model to load",
    )

    [worker] = public_workers(service)
    worker.kill()  # gunicorn forks a new worker from its master, which has the app loaded
    # Sent at once, on a new connection: it waits for the new worker, which
    # accepts before its model has loaded, and is answered without waiting for it.
    first = search(service)
    assert first["legs"]["vector"]["status"] == "skipped"
    assert first["legs"]["vector"]["error"] == MODEL_LOADING
    assert first["legs"]["text"]["status"] == "ok"
    assert "green tea" in " ".join(item["content"] for item in first["memories"])
    assert public_workers(service)[0].pid != worker.pid

    wait_for(
        lambda: search(service)["legs"]["vector"]["status"] == "ok",
        HTTP_TIMEOUT,
        "the new worker's embedding model to load",
    )


@pytest.fixture
def model_loading(settings):
    """A local model configured, and this process marked as still loading it."""
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    embeddings._model_loading.set()
    yield
    embeddings._model_loading.clear()


@pytest.mark.django_db
def test_while_the_model_loads_recall_and_a_create_answer_by_text_without_waiting(
    model_loading, alice
):
    tea = make_memory(alice, "Drinks green tea every morning.")

    result = recall(alice, "green tea in the morning")
    assert result.legs["vector"].status == "skipped"
    assert result.legs["vector"].error == MODEL_LOADING
    assert result.legs["text"].status == "ok"
    assert [item.memory for item in result.memories] == [tea]

    found = find_related(alice, "Drinks green tea every morning.")
    assert found.degraded == MODEL_STILL_LOADING
    assert found.embedding is None
    assert [item.memory for item in found.duplicates] == [tea]
