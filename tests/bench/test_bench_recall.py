from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection

SCRATCH = "test_retrieval_bench_smoke"


def database_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


@pytest.mark.django_db(transaction=True)
def test_it_fills_a_scratch_database_measures_and_drops_it():
    test_database = connection.settings_dict["NAME"]
    out = StringIO()
    call_command(
        "bench_recall",
        "--memories",
        "40",
        "--owners",
        "2",
        "--queries",
        "5",
        "--warmup",
        "2",
        "--database",
        SCRATCH,
        stdout=out,
    )
    text = out.getvalue()
    assert "filled 80 memories for 2 owner(s)" in text
    assert "database test_retrieval_bench_smoke: 80 memories, 2 owners" in text
    assert "5 queries after 2 warm-up" in text
    lines = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
    for name in ("recall", "vector", "text", "entity"):
        p50, p95, p99 = (float(value) for value in lines[name][:3])
        assert 0 < p50 <= p95 <= p99
    for part in ("legs", "fuse", "pack"):
        p50, p95, p99 = (float(value) for value in lines[part][:3])
        assert 0 <= p50 <= p95 <= p99
    assert float(lines["legs"][0]) < float(lines["recall"][0])
    assert "ok 5" in " ".join(lines["text"])
    assert not database_exists(SCRATCH)
    # The command leaves the test database the connection pointed at.
    assert connection.settings_dict["NAME"] == test_database


@pytest.mark.django_db
def test_it_refuses_the_services_own_database():
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="must not be the service's own"):
        call_command("bench_recall", "--database", connection.settings_dict["NAME"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--queries", "0", "argument --queries: 0 is not at least 1"),
        ("--warmup", "-1", "argument --warmup: -1 is not at least 0"),
        ("--memories", "many", "argument --memories: 'many' is not a whole number"),
    ],
)
def test_it_refuses_counts_it_cannot_run(option, value, message):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match=message):
        call_command("bench_recall", option, value, "--database", SCRATCH)
    assert not database_exists(SCRATCH)


def test_every_seed_asks_about_the_fills_topics_and_the_default_seed_is_unchanged():
    from bench.management.commands.bench_recall import QUERY_NOISE, TOPICS, Synthesizer

    default, other = Synthesizer(7, 16), Synthesizer(57, 16)
    # A --reuse run with another seed queries around the centres its fill used.
    assert np.array_equal(default.centres, other.centres)
    # The default seed's stream is the one it had when each seed drew its own
    # centres first: its fills and queries are those earlier figures came from.
    numbers = np.random.default_rng(7)
    centres = numbers.standard_normal((TOPICS, 16)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    assert np.array_equal(default.centres, centres)
    jitter = numbers.standard_normal((1, 16)).astype(np.float32)
    vector = centres[[3]] + QUERY_NOISE * jitter / np.sqrt(16) * 4
    expected = vector / np.linalg.norm(vector, axis=1, keepdims=True)
    assert np.array_equal(default.embeddings(np.array([3]), QUERY_NOISE), expected)
    # Another seed still draws its own jitter.
    assert not np.array_equal(other.embeddings(np.array([3]), QUERY_NOISE), expected)
