"""bench_embed on a few texts, so the benchmark does not rot."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from retrieval.onnx_model import BULK_BATCH_TEXTS

TINY_EVAL = Path(__file__).resolve().parents[1] / "evaluation" / "tiny-eval.json"


@pytest.mark.slow
def test_it_times_the_service_and_the_bulk_model_on_the_same_texts(settings):
    settings.EMBEDDING_BATCH_SIZE = 32
    out = StringIO()
    call_command(
        "bench_embed",
        *("--texts", "40", "--runs", "2", "--threads", "2", "--runtime", "onnx"),
        *("--precision", "float32", "--queries", "5"),
        *("--dataset", str(TINY_EVAL)),
        stdout=out,
    )
    text = out.getvalue()
    assert text.startswith("40 texts (mean "), text
    assert "in calls of 512, onnx float32, 2 thread(s)" in text
    assert re.search(
        r"^one query at a time \(5 questions, 1 thread\(s\)\): p50 [\d.]+ ms, p95 [\d.]+ ms$",
        text,
        re.M,
    ), text
    assert len(re.findall(r"^run \d: service [\d.]+ texts/s, bulk [\d.]+ texts/s", text, re.M)) == 2
    rows = {
        parts[0]: parts[1:]
        for parts in (line.split() for line in text.splitlines())
        if parts and parts[0] in ("service", "bulk")
    }
    assert rows["service"][0] == "32" and rows["bulk"][0] == str(BULK_BATCH_TEXTS)
    for _batch, median, *runs in rows.values():
        assert len(runs) == 2 and min(map(float, runs)) <= float(median) <= max(map(float, runs))
        assert float(median) > 0


@pytest.mark.parametrize("option", ["--texts", "--runs", "--threads"])
def test_it_refuses_a_count_that_is_not_positive(option):
    with pytest.raises(CommandError, match=f"argument {option}: 0 is not at least 1"):
        call_command("bench_embed", option, "0")


def test_it_needs_a_dataset(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"format": "timothy-eval/1", "conversations": []}')
    with pytest.raises(CommandError, match="no memories or no questions"):
        call_command("bench_embed", "--dataset", str(empty))
