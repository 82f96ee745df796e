"""Memories left without a vector get one within minutes, without a restart.

A vector is lost when the worker dies while it holds a memory's embedding
task, or when the database goes away while the worker stores it. The worker
catches up every minute (a django-q2 schedule), says so in its log, and the
home page counts what still waits.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from django_q.models import Schedule

from memories.models import Memory
from memories.tasks import CATCH_UP_LOCK, catch_up_embeddings, embed_missing
from tests.base import make_memory
from tests.fakes.openai_server import FakeOpenAI
from tests.faults.conftest import remember
from timothy.drill import START_TIMEOUT, ServeProcess, restart_postgres, wait_for

# The catch-up runs every minute for memories a minute old: a few minutes at most.
CATCH_UP_DEADLINE = 420


def test_it_schedules_the_catch_up_every_minute(db):
    schedule = Schedule.objects.get(func="memories.tasks.catch_up_embeddings")
    assert schedule.schedule_type == Schedule.MINUTES
    assert schedule.minutes == 1
    assert schedule.repeats == -1


def test_it_catches_up_what_waited_longer_than_its_own_task_would(openai_embeddings, alice, caplog):
    lost = make_memory(alice, "Alice keeps bees.", created_at=timezone.now() - timedelta(minutes=5))
    # A minute old at most: its own task is most likely still queued.
    recent = make_memory(alice, "Alice plays the oboe.")

    with caplog.at_level(logging.INFO, logger="memories.tasks"):
        summary = catch_up_embeddings()

    assert summary == "1 waiting for a vector, 1 embedded"
    assert f"Embedding catch-up: {summary}" in caplog.text
    lost.refresh_from_db()
    recent.refresh_from_db()
    assert lost.embedding is not None
    assert recent.embedding is None


def test_it_says_nothing_when_nothing_waits(openai_embeddings, alice, caplog):
    make_memory(alice, "Alice keeps bees.", embedding=[0.5] * 384)
    with caplog.at_level(logging.INFO, logger="memories.tasks"):
        assert catch_up_embeddings() == "no memory is waiting for a vector"
    assert "Embedding catch-up" not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_it_runs_one_catch_up_at_a_time(openai_embeddings, alice):
    memory = make_memory(alice, "Alice keeps bees.")
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [CATCH_UP_LOCK])
        assert embed_missing() == "another embedding catch-up is running"
        other.execute("SELECT pg_advisory_unlock(%s)", [CATCH_UP_LOCK])
    memory.refresh_from_db()
    assert memory.embedding is None
    assert embed_missing() == "1 waiting for a vector, 1 embedded"


def test_it_counts_the_owners_memories_waiting_for_a_vector_on_the_home_page(
    openai_embeddings, client, alice, bob
):
    make_memory(alice, "Alice keeps bees.")
    Memory.propose(alice, "Alice might like jazz.", "preference")
    make_memory(alice, "Alice plays the oboe.", embedding=[0.5] * 384)
    make_memory(alice, "Alice once lived in Oslo.", status=Memory.Status.ARCHIVED)
    make_memory(bob, "Bob sings in a choir.")
    client.force_login(alice)

    response = client.get(reverse("home"))

    assert response.context["awaiting_vector"] == 2
    assert b"2 memories waiting for a vector" in response.content


def test_it_counts_nothing_without_an_embedding_provider(settings, client, alice):
    settings.EMBEDDING_PROVIDER = "none"
    make_memory(alice, "Alice keeps bees.")
    client.force_login(alice)
    response = client.get(reverse("home"))
    assert b"waiting for a vector" not in response.content


# --- for real: the service, its worker and a fake embeddings API ----------------


class HoldingFake(FakeOpenAI):
    """Holds back the embedding of texts containing ``hold``, until released."""

    def __init__(self, hold: str) -> None:
        super().__init__()
        self.hold = hold
        self.holding = threading.Event()
        self.released = threading.Event()

    def _next_answer(self, path: str, payload: object):
        texts = payload.get("input") if isinstance(payload, dict) else None
        texts = [texts] if isinstance(texts, str) else texts or []
        if any(self.hold in text for text in texts) and not self.released.is_set():
            self.holding.set()
            self.released.wait(timeout=START_TIMEOUT)
        return super()._next_answer(path, payload)


@pytest.fixture
def holding_fake():
    fake = HoldingFake(hold="the marker").start()
    yield fake
    fake.released.set()
    fake.stop()


def embedded_service(start_service, fake: FakeOpenAI) -> ServeProcess:
    """The service embedding through ``fake``, once its start-up catch-up is done
    (so that only the memory's own task embeds what the test writes)."""
    service = start_service(
        TIMOTHY_EMBEDDING_PROVIDER="openai",
        TIMOTHY_EMBEDDING_BASE_URL=fake.base_url,
        TIMOTHY_EMBEDDING_MODEL="text-embedding-3-small",
        TIMOTHY_EMBEDDING_API_KEY="sk-test",
        TIMOTHY_EMBEDDING_DIMENSIONS="384",
        # The held request must outlast what we do meanwhile.
        TIMOTHY_EMBEDDING_TIMEOUT=str(START_TIMEOUT),
    )
    service.wait_for_output(r"Processed 'memories.tasks.embed_missing'")
    return service


def has_vector(service: ServeProcess, memory_id: int) -> bool:
    try:
        with psycopg.connect(
            host=str(service.data_dir / "postgres"), dbname="timothy", user="postgres"
        ) as db:
            row = db.execute(
                "SELECT embedding IS NOT NULL FROM memories_memory WHERE id = %s", [memory_id]
            ).fetchone()
    except psycopg.OperationalError:
        return False
    return bool(row and row[0])


def test_it_embeds_a_memory_whose_task_died_with_the_worker(start_service, holding_fake):
    service = embedded_service(start_service, holding_fake)
    memory = remember(service, "Alice keeps the marker in her bag.")
    wait_for(holding_fake.holding.is_set, START_TIMEOUT, "the worker to ask for the vector")

    os.kill(service.worker().pid, signal.SIGKILL)
    service.wait_for_output(r"Restarted the worker")
    holding_fake.released.set()

    wait_for(lambda: has_vector(service, memory["id"]), CATCH_UP_DEADLINE, "the vector")


def test_it_embeds_a_memory_whose_vector_was_lost_to_a_database_restart(
    start_service, holding_fake
):
    service = embedded_service(start_service, holding_fake)
    memory = remember(service, "Alice hides the marker under the mat.")
    wait_for(holding_fake.holding.is_set, START_TIMEOUT, "the worker to ask for the vector")

    # The worker's connection dies with the server: storing the vector fails,
    # and the catch-up stores it. (On a busy machine serve may notice the server
    # down first and the worker's task run again on a new connection: then the
    # vector comes without a catch-up. Either way it must come, with no restart.)
    restart_postgres(service.data_dir)
    holding_fake.released.set()

    wait_for(lambda: has_vector(service, memory["id"]), CATCH_UP_DEADLINE, "the vector")
    if re.search(rf"Could not store the embedding of memory {memory['id']}\b", service.output):
        service.wait_for_output(r"Embedding catch-up: 1 waiting for a vector, 1 embedded")
