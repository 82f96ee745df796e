"""The query's way to a vector: cache, batching of concurrent queries, ONNX Runtime, threads."""

from __future__ import annotations

import json
import threading
import time
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from memories.models import Memory
from memories.tasks import embed_memory
from retrieval import embeddings
from retrieval.embeddings import (
    LocalEmbeddingProvider,
    QueryCache,
    QueryEmbedder,
    default_local_model_path,
    get_provider,
)
from retrieval.management.commands import recall as recall_command
from retrieval.onnx_model import BULK_BATCH_TEXTS, PADDING_TOKENS_PER_RUN, plan_batches
from retrieval.recall import recall
from tests.base import make_memory

TINY_EVAL = Path(__file__).resolve().parents[1] / "evaluation" / "tiny-eval.json"
WAIT_SECONDS = 120


def sample_sentences() -> list[str]:
    texts = [
        "Prefers an aisle seat on long-haul flights.",
        "Her sister Ines lives in Lisbon and works as an architect.",
        "Allergic to peanuts; carries an EpiPen since 2019.",
        "Booked the dentist for Tuesday at 9:30, the clinic on Mare Street.",
        "Thinks the new manager listens more than the last one did.",
        "Ran the Berlin half marathon in 1:52 — a personal best.",
        "Wants a quieter flat, ideally near Victoria Park, under £1,800 a month.",
        "Is learning Portuguese with a tutor every Thursday evening.",
    ]
    for conversation in json.loads(TINY_EVAL.read_text())["conversations"]:
        texts += [memory["content"] for memory in conversation["memories"]]
        texts += [query["query"] for query in conversation["queries"]]
    return texts


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_it_forgets_the_least_recently_used_query():
    cache = QueryCache(2)
    cache.put("a", [1.0])
    cache.put("b", [2.0])
    assert cache.get("a") == (1.0,)  # a is now the most recent
    cache.put("c", [3.0])
    assert cache.get("b") is None
    assert cache.get("a") == (1.0,) and cache.get("c") == (3.0,)
    off = QueryCache(0)
    off.put("a", [1.0])
    assert off.get("a") is None


@pytest.mark.django_db
def test_it_embeds_a_repeated_query_once(openai_embeddings, settings, alice):
    settings.EMBEDDING_QUERY_CACHE = 16
    assert embed_memory(make_memory(alice, "Prefers an aisle seat on long-haul flights.").pk)
    first = recall(alice, "Which seat do I like?", dry_run=True)
    second = recall(alice, "Which seat do I like?", dry_run=True)
    recall(alice, "Which seat did I book?", dry_run=True)
    assert first.legs["vector"].status == second.legs["vector"].status == "ok"
    queries = [
        request.json["input"]
        for request in openai_embeddings.requests_to("/v1/embeddings")
        if request.json["input"][0].startswith("Which seat")
    ]
    assert queries == [["Which seat do I like?"], ["Which seat did I book?"]]
    assert [m.memory.pk for m in first.memories] == [m.memory.pk for m in second.memories]


@pytest.mark.django_db
def test_it_reports_where_the_time_went(openai_embeddings, alice):
    assert embed_memory(make_memory(alice, "Prefers an aisle seat on long-haul flights.").pk)
    result = recall(alice, "Which seat do I like on flights?", dry_run=True)
    assert set(result.timings) == {"start", "legs", "embed", "fuse", "pack"}
    assert result.timings["embed"] > 0
    assert all(value >= 0 for value in result.timings.values())
    # The stages add up to the whole call; embedding happens inside the legs.
    assert sum(v for k, v in result.timings.items() if k != "embed") == pytest.approx(
        result.ms, rel=1e-6
    )
    assert result.timings["embed"] <= result.timings["legs"]


def test_it_passes_lists_and_failures_through_the_query_embedder():
    class Failing:
        name = "failing"

        def embed(self, texts, *, timeout=None):
            raise RuntimeError("down")

    embedder = QueryEmbedder(Failing())
    with pytest.raises(RuntimeError, match="down"):
        embedder.embed(["q"])
    assert embedder.ms > 0 and not embedder.cached


@pytest.fixture
def minilm(settings, tmp_path):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    settings.EMBEDDING_THREADS = 1
    return default_local_model_path()


@pytest.mark.slow
def test_one_query_alone_gets_the_vector_it_gets_in_a_batch(minilm, settings):
    onnx = LocalEmbeddingProvider(
        minilm, batch_size=16, runtime="onnx", export_dir=Path(settings.DATA_DIR) / "models"
    )
    texts = sample_sentences() + ["", "?", "word " * 600]  # empty, tiny, truncated
    got = onnx.embed(texts, timeout=WAIT_SECONDS)
    assert onnx._model.runtime == "onnx"
    assert len(got) == len(texts) and len(got[0]) == 384
    [alone] = onnx.embed([texts[3]], timeout=WAIT_SECONDS)
    assert cosines([alone], [got[3]])[0] >= 1 - 1e-6


@pytest.mark.slow
def test_a_bulk_job_runs_one_small_batch_per_thread_with_the_same_vectors(minilm, settings):
    export_dir = Path(settings.DATA_DIR) / "models"
    single = LocalEmbeddingProvider(minilm, batch_size=64, runtime="onnx", export_dir=export_dir)
    bulk = LocalEmbeddingProvider(
        minilm, batch_size=64, runtime="onnx", threads=2, export_dir=export_dir, bulk=True
    )
    model = bulk._model_or_load()
    assert model.batch_size == BULK_BATCH_TEXTS and model.parallel_batches == 2
    assert model.session.get_session_options().intra_op_num_threads == 1
    batches_on: list[str] = []
    real_encode_batch = model._encode_batch
    first_two_together = threading.Barrier(2, timeout=WAIT_SECONDS)

    def encode_batch(texts):
        batches_on.append(threading.current_thread().name)
        if len(batches_on) <= 2:
            first_two_together.wait()  # broken unless two batches run at once
        return real_encode_batch(texts)

    model._encode_batch = encode_batch
    texts = sample_sentences() * 3
    got = bulk.embed(texts, timeout=WAIT_SECONDS)
    expected = single.embed(texts, timeout=WAIT_SECONDS)
    assert len(set(batches_on)) == 2
    lengths = [len(model.tokenizer.ids(text)) for text in texts]
    assert len(batches_on) == len(plan_batches(lengths, BULK_BATCH_TEXTS))
    assert cosines(got, expected).min() >= 1 - 1e-6
    assert "bulk" in repr(bulk) and "bulk" not in repr(single)


def test_texts_of_like_length_share_a_batch_and_a_much_longer_one_runs_alone():
    short, long = 8, 8 + PADDING_TOKENS_PER_RUN + 30
    # Two queries and a new memory's text waiting together: the memory alone,
    # the queries together.
    assert plan_batches([short, long, short + 1], batch_size=64) == [[1], [2, 0]]
    # Within the padding a run is worth, one batch, longest first.
    near = [short, short + PADDING_TOKENS_PER_RUN, short + 3]
    assert plan_batches(near, batch_size=64) == [[1, 2, 0]]
    # A step just beyond it starts a new batch.
    assert plan_batches([short, short + PADDING_TOKENS_PER_RUN + 1], batch_size=64) == [[1], [0]]


def test_batches_hold_at_most_the_batch_size_and_every_text_once():
    lengths = [12] * 7 + [40] * 3 + [13, 11]
    batches = plan_batches(lengths, batch_size=4)
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    assert all(len(batch) <= 4 for batch in batches)
    assert batches[0] == [7, 8, 9]  # the long texts, alone together
    for batch in batches:
        widths = [lengths[index] for index in batch]
        assert widths == sorted(widths, reverse=True)
        assert widths[0] - widths[-1] <= PADDING_TOKENS_PER_RUN


@pytest.mark.slow
def test_a_query_waiting_beside_a_long_text_gets_the_vector_it_gets_alone(minilm, settings):
    provider = LocalEmbeddingProvider(
        minilm, batch_size=64, runtime="onnx", export_dir=Path(settings.DATA_DIR) / "models"
    )
    model = provider._model_or_load()
    query = "Where do I live now?"
    memory = "Moved " + "and then moved again " * 12 + "to a flat near Victoria Park."
    widths: list[int] = []
    real_encode_batch = model._encode_batch

    def encode_batch(rows):
        widths.append(max(len(row) for row in rows))
        return real_encode_batch(rows)

    model._encode_batch = encode_batch
    together = model.encode([memory, query])
    assert sorted(widths) == [len(model.tokenizer.ids(query)), len(model.tokenizer.ids(memory))]
    apart = np.vstack([model.encode([memory]), model.encode([query])])
    assert cosines(together, apart).min() >= 1 - 1e-6


@pytest.mark.slow
def test_it_encodes_queries_that_wait_together_in_one_pass(minilm, settings):
    provider = LocalEmbeddingProvider(
        minilm, batch_size=64, runtime="onnx", export_dir=Path(settings.DATA_DIR) / "models"
    )
    model = provider._model_or_load()
    queries = [f"question number {i} about my garden" for i in range(8)]
    expected = model.encode(queries)
    passes: list[int] = []
    release = threading.Event()
    real_encode = model.encode

    def encode(texts):
        passes.append(len(texts))
        if len(passes) == 1:
            release.wait(WAIT_SECONDS)  # hold the worker until every query is queued
        return real_encode(texts)

    model.encode = encode
    results: dict[int, list[float]] = {}

    def ask(index: int) -> None:
        results[index] = provider.embed([queries[index]], timeout=WAIT_SECONDS)[0]

    blocker = threading.Thread(target=provider.embed, args=(["hold the worker"],))
    blocker.start()
    deadline = time.monotonic() + WAIT_SECONDS
    while not passes and time.monotonic() < deadline:
        time.sleep(0.01)
    askers = [threading.Thread(target=ask, args=(i,)) for i in range(len(queries))]
    for thread in askers:
        thread.start()
    while provider._jobs.qsize() < len(queries) and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for thread in [blocker, *askers]:
        thread.join(WAIT_SECONDS)
    assert passes == [1, len(queries)]
    got = [results[i] for i in range(len(queries))]
    assert cosines(got, expected).min() >= 1 - 1e-6


@pytest.mark.slow
@pytest.mark.django_db
def test_it_loads_the_model_before_a_one_shot_recall_starts(minilm, monkeypatch, alice):
    embeddings._provider_cache.clear()
    memory = make_memory(alice, "Prefers an aisle seat.", Memory.Type.PREFERENCE)
    assert embed_memory(memory.pk)
    embeddings._provider_cache.clear()  # a fresh process: nothing loaded yet
    loaded_at_call: list[bool] = []
    real_recall = recall_command.recall

    def spy(*args, **kwargs):
        loaded_at_call.append(get_provider()._model is not None)
        return real_recall(*args, **kwargs)

    monkeypatch.setattr(recall_command, "recall", spy)
    out = StringIO()
    call_command("recall", "--owner", "alice", "--json", "--dry-run", "seat", stdout=out)
    assert loaded_at_call == [True]
    assert json.loads(out.getvalue())["legs"]["vector"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.django_db
def test_reembed_runs_the_local_model_in_bulk_with_the_vectors_searches_use(minilm, alice):
    embeddings._provider_cache.clear()
    texts = sample_sentences()[:40]
    memories = [make_memory(alice, text, Memory.Type.SEMANTIC) for text in texts]
    out = StringIO()
    call_command("reembed", "--threads", "2", stdout=out)
    assert f"Embedded {len(texts)} memories" in out.getvalue()
    assert "2 threads, bulk)" in out.getvalue()
    stored = [Memory.objects.get(pk=memory.pk).embedding for memory in memories]
    expected = get_provider().embed(texts, timeout=WAIT_SECONDS)
    assert not get_provider().bulk
    assert cosines(stored, expected).min() >= 1 - 1e-6
