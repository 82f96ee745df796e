"""One JSON shape of a memory (memories/memory_json.py): API, search and export."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memories.io import export_lines
from memories.memory_json import memory_to_dict
from retrieval.results import ScoredMemory
from tests.base import make_memory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
def memory(alice):
    return make_memory(
        alice,
        "Alice lives in Lyon.",
        entities=["Alice", "Lyon"],
        created_at=AT,
        metadata={"phase": "turn_end"},
        embedding=[0.1, -1e-05] + [0.25] * 382,
    )


def test_it_answers_the_api_shape_in_its_order(memory):
    assert json.dumps(memory_to_dict(memory)) == (
        f'{{"id": {memory.pk}, "type": "semantic", "content": "Alice lives in Lyon.", '
        '"status": "active", "entities": ["Alice", "Lyon"], "confidence": 0.9, '
        '"source": "api", "session_id": "", "created_at": "2026-05-01T09:30:00+00:00", '
        '"last_confirmed_at": "2026-05-01T09:30:00+00:00", "last_retrieved_at": null, '
        '"superseded_by": null, "about": {"subject": "Alice", "kind": "person", '
        '"aspect": "home", "occasion": "", "set_by": "rules"}}'
    )


def test_it_writes_the_export_line_in_its_order(memory, alice):
    [line] = export_lines(alice)
    record = json.loads(line)
    assert list(record) == [
        "id",
        "content",
        "type",
        "status",
        "entities",
        "confidence",
        "created_at",
        "last_confirmed_at",
        "last_retrieved_at",
        "source",
        "session_id",
        "metadata",
        "embedding",
        "superseded_by",
        "about",
    ]
    assert record["metadata"] == {"phase": "turn_end"}
    # The shortest decimal of each stored float32.
    assert record["embedding"][:3] == [0.1, -1e-05, 0.25]
    api = memory_to_dict(memory)
    assert {name: record[name] for name in api} == api


def test_it_adds_the_scores_to_a_search_result(memory):
    item = ScoredMemory(memory=memory, score=0.5, parts={"final": 0.5}, tokens=7, position=0)
    assert item.to_dict() == memory_to_dict(memory) | {
        "score": 0.5,
        "score_parts": {"final": 0.5},
        "tokens": 7,
        "position": 0,
    }
