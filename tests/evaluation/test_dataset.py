"""Reading and validating timothy-eval/1 files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval.evaluation.dataset import DatasetError, load_dataset, parse_dataset

TINY = Path(__file__).with_name("tiny-eval.json")


def minimal(**conversation_overrides) -> dict:
    conversation = {
        "id": "c1",
        "as_of": "2024-01-02T00:00:00+00:00",
        "memories": [
            {
                "id": "m1",
                "content": "Ann: hello",
                "type": "episodic",
                "entities": ["Ann"],
                "created_at": "2024-01-01T00:00:00+00:00",
            }
        ],
        "queries": [{"query": "hello?", "relevant": ["m1"], "category": "single-hop"}],
    }
    conversation.update(conversation_overrides)
    return {"name": "mini", "format": "timothy-eval/1", "conversations": [conversation]}


def test_it_loads_the_test_dataset():
    dataset = load_dataset(TINY)
    assert dataset.name == "tiny-eval"
    assert [c.id for c in dataset.conversations] == ["trip", "home"]
    assert dataset.memory_count == 8
    assert dataset.query_count == 5
    trip = dataset.conversations[0]
    assert trip.as_of == datetime(2024, 3, 2, 12, tzinfo=UTC)
    assert trip.memories[0].entities == ["Lake Tahoe"]
    assert trip.queries[2].relevant == ["t4", "t6"]


def test_it_defaults_last_confirmed_to_created():
    memory = parse_dataset(minimal()).conversations[0].memories[0]
    assert memory.last_confirmed_at == memory.created_at


def test_it_drops_duplicate_evidence_ids():
    data = minimal(queries=[{"query": "q", "relevant": ["m1", "m1"], "category": "x"}])
    assert parse_dataset(data).conversations[0].queries[0].relevant == ["m1"]


def test_it_lists_every_problem_at_once():
    data = minimal(
        as_of="2024-01-02T00:00:00",
        queries=[
            {"query": "q", "relevant": ["m9"], "category": "x"},
            {"query": "q", "relevant": [], "category": "x"},
        ],
    )
    data["format"] = "other/2"
    data["conversations"][0]["memories"].append(dict(data["conversations"][0]["memories"][0]))
    with pytest.raises(DatasetError) as caught:
        parse_dataset(data, source_name="bad.json")
    problems = "\n".join(caught.value.problems)
    assert "format must be 'timothy-eval/1'" in problems
    assert "as_of must carry a UTC offset" in problems
    assert "unknown memory ids ['m9']" in problems
    assert "relevant must be a non-empty list" in problems
    assert "id 'm1' appears twice" in problems
    assert str(caught.value).startswith("bad.json is not a valid timothy-eval/1 dataset")


def test_it_rejects_an_unknown_memory_type():
    data = minimal()
    data["conversations"][0]["memories"][0]["type"] = "gossip"
    with pytest.raises(DatasetError, match="type must be one of"):
        parse_dataset(data)


def test_it_reports_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(DatasetError, match="not JSON"):
        load_dataset(path)


def test_it_reports_a_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="cannot read the file"):
        load_dataset(tmp_path / "absent.json")
