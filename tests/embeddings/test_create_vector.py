"""A create stores the vector it computed with its row and queues no task to compute it again."""

from __future__ import annotations

import pytest
from django_q.models import OrmQ, Task

from memories.models import Memory
from tests.api.conftest import ApiClient, issue_token
from tests.fakes.openai_server import EMBEDDINGS, Answer, deterministic_vector

TEXT = "Alice keeps bees on the roof of her building in Porto."


@pytest.fixture
def alice_api(live_server, alice):
    client = ApiClient(live_server.url, issue_token(alice))
    yield client
    client.session.close()


@pytest.mark.parametrize("mode", ["remember", "propose"])
def test_a_create_stores_its_vector_and_queues_no_task(openai_embeddings, alice_api, mode):
    created = alice_api.create(TEXT, mode=mode)
    memory = Memory.objects.get(pk=created["id"])
    assert list(memory.embedding) == pytest.approx(deterministic_vector(TEXT, 384), abs=1e-6)
    # The vector computed to compare with Alice's memories was stored with the row:
    # no embedding task was queued (the suite runs django-q in sync mode, which
    # would have run one and kept its record), and the text was embedded once.
    assert Task.objects.count() == 0
    assert OrmQ.objects.count() == 0
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 1


def test_a_create_whose_vector_could_not_be_computed_still_gets_one_in_the_background(
    openai_embeddings, alice_api
):
    # The create's own embedding fails; the background task's succeeds.
    openai_embeddings.queue(EMBEDDINGS, Answer(status=400, json={"error": {"message": "no"}}))
    created = alice_api.create(TEXT)
    memory = Memory.objects.get(pk=created["id"])
    assert list(memory.embedding) == pytest.approx(deterministic_vector(TEXT, 384), abs=1e-6)
    assert Task.objects.filter(func="memories.tasks.embed_memory").count() == 1
    assert len(openai_embeddings.requests_to(EMBEDDINGS)) == 2


@pytest.mark.parametrize("mode", ["remember", "propose"])
def test_a_create_writes_its_row_with_the_vector_in_one_insert(openai_embeddings, alice, mode):
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(headers={"Authorization": f"Bearer {issue_token(alice)}"})
    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            "/v1/memories",
            {"content": TEXT, "type": "semantic", "mode": mode},
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    table = Memory._meta.db_table
    writes = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith((f'INSERT INTO "{table}"', f'UPDATE "{table}"'))
    ]
    assert len(writes) == 1 and writes[0].startswith("INSERT"), writes
    memory = Memory.objects.get(pk=response.json()["id"])
    assert list(memory.embedding) == pytest.approx(deterministic_vector(TEXT, 384), abs=1e-6)
