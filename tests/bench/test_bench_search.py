"""bench_search end to end on a tiny scratch database, so the benchmark does not rot."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from bench.management.commands.bench_search import PersonalCorpus
from bench.measure import describe_load

SCRATCH = "test_retrieval_bench_search_smoke"
TINY_EVAL = Path(__file__).resolve().parents[1] / "evaluation" / "tiny-eval.json"


def database_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_serves_a_scratch_owner_and_measures_search_over_http():
    test_database = connection.settings_dict["NAME"]
    out = StringIO()
    call_command(
        "bench_search",
        "--memories",
        "40",
        "--queries",
        "6",
        "--concurrency",
        "1,3",
        "--web-workers",
        "1",
        "--dataset",
        str(TINY_EVAL),
        "--database",
        SCRATCH,
        stdout=out,
    )
    text = out.getvalue()
    assert re.search(r"filled 40 memories in .* embedding .* onnx", text), text
    assert "one owner, 40 active memories (40 with vectors)" in text
    assert "(as `make run`), 1 worker(s) × 4 threads" in text
    rows = {
        int(parts[0]): parts[1:]
        for parts in (line.split() for line in text.splitlines())
        if len(parts) > 6 and parts[0].isdigit()
    }
    assert set(rows) == {1, 3}
    for queries, errors, p50, p95, p99, *_rest in rows.values():
        assert (queries, errors) == ("6", "0"), text
        assert 0 < float(p50) <= float(p95) <= float(p99)
    split = re.search(r"concurrency 1, where the time went .*", text).group(0)
    for stage in ("embed", "legs", "fuse", "pack", "recall", "http"):
        assert f" {stage} " in split
    legs = re.search(r"legs \(inside .*", text).group(0)
    assert "vector" in legs and "(ok 6)" in legs
    assert text.count("load average") == 2
    assert not database_exists(SCRATCH)
    assert connection.settings_dict["NAME"] == test_database


@pytest.mark.django_db
def test_it_refuses_the_services_own_database():
    with pytest.raises(CommandError, match="must not be the service's own"):
        call_command("bench_search", "--database", connection.settings_dict["NAME"])


def test_it_recombines_real_memories_into_many_distinct_ones():
    corpus = PersonalCorpus([TINY_EVAL], seed=3)
    memories = [corpus.memory() for _ in range(200)]
    assert len({text for text, _, _ in memories}) > 20
    originals = {memory["content"] for memory in corpus.memories}
    assert all(text.strip() for text, _, _ in memories)
    assert any(text not in originals for text, _, _ in memories)
    assert {memory_type for _, memory_type, _ in memories} <= {
        "semantic",
        "preference",
        "episodic",
        "reflection",
    }
    assert all(corpus.query().strip() for _ in range(20))


def test_it_reads_the_load_against_the_cores():
    assert describe_load(1.2, 16).endswith("0.07 per core: quiet")
    assert describe_load(1.2, 2).endswith("0.60 per core: busy")
    assert describe_load(4.6, 2).endswith(
        "2.30 per core: contended: more runnable processes than cores"
    )
