import json
import math
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval import legs
from retrieval import recall as recall_module
from retrieval.models import RetrievalStamp
from retrieval.recall import recall
from retrieval.results import RecallFailed
from tests.base import make_memory
from tests.retrieval.helpers import axis


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"pipeline": "magic"}, "Unknown pipeline 'magic'"),
        ({"token_budget": 0}, "between 1 and"),
        ({"token_budget": 32001}, "between 1 and"),
        ({"token_budget": True}, "whole number"),
        ({"token_budget": "100"}, "whole number"),
        ({"types": ["semantic", "gossip"]}, "Unknown memory type 'gossip'"),
        ({"legs": ["text", "psychic"]}, "Unknown leg 'psychic'"),
        ({"legs": []}, "at least one leg"),
        ({"query_embedding": [0.1, 0.2]}, "has 2 dimensions"),
        ({"query_embedding": [math.nan] * 384}, "finite"),
        ({"query_embedding": ["x"] * 384}, "list of numbers"),
        ({"as_of": "2026-01-01"}, "datetime"),
    ],
)
def test_it_rejects_bad_arguments(alice, arguments, message):
    with pytest.raises(ValueError, match=message):
        recall(alice, "chess", **arguments)


@pytest.mark.django_db
def test_it_rejects_a_query_that_is_not_text(alice):
    with pytest.raises(ValueError, match="query must be text"):
        recall(alice, None)


@pytest.mark.django_db
def test_it_uses_the_default_budget_and_pipeline(alice, settings):
    settings.DEFAULT_TOKEN_BUDGET = 333
    settings.DEFAULT_PIPELINE = "freshness"
    result = recall(alice, "chess")
    assert (result.token_budget, result.pipeline) == (333, "freshness")
    assert set(result.legs) == {"bm25", "rerank"}


@pytest.mark.django_db
def test_it_stamps_only_what_went_into_the_block(alice):
    confirmed_at = timezone.now() - timedelta(days=3)
    packed = make_memory(alice, "Chess club.", created_at=confirmed_at)
    too_big = make_memory(
        alice, "Chess " + "very long story " * 200, created_at=confirmed_at - timedelta(days=1)
    )
    unrelated = make_memory(alice, "Gardening.")
    # The seed profile packs whole memories or none (the default cuts a long
    # one short instead: test_packing.py).
    result = recall(alice, "chess", token_budget=200, explain=True, profile="seed")
    assert [item.memory.pk for item in result.memories] == [packed.pk]
    assert [(item.memory.pk, item.cut_reason) for item in result.cut] == [
        (too_big.pk, "over_budget")
    ]
    rows = Memory.objects.in_bulk([packed.pk, too_big.pk, unrelated.pk])
    assert rows[packed.pk].last_retrieved_at is not None
    assert rows[packed.pk].last_retrieved_at == result.memories[0].memory.last_retrieved_at
    assert rows[packed.pk].last_confirmed_at == confirmed_at
    assert rows[too_big.pk].last_retrieved_at is None
    assert rows[unrelated.pk].last_retrieved_at is None


def _row_version(memory) -> str:
    # The transaction that wrote the row's current version: any UPDATE moves it.
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM memories_memory WHERE id = %s", [memory.pk])
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_a_stamp_leaves_the_memory_row_alone(alice):
    memory = make_memory(alice, "Chess club.")
    before = _row_version(memory)
    recall(alice, "chess")
    stamp = RetrievalStamp.objects.get(memory=memory)
    assert (stamp.owner_id, stamp.last_retrieved_at is not None) == (alice.pk, True)
    # Neither the row nor its index entries were written again.
    assert _row_version(memory) == before


@pytest.mark.django_db
def test_a_stamp_never_moves_back_nor_lands_on_another_owner(alice, bob):
    now = timezone.now()
    memory = make_memory(alice, "Chess club.", last_retrieved_at=now)
    recall_module._stamp(alice.pk, [memory.pk], now - timedelta(hours=3))
    assert RetrievalStamp.objects.get(memory=memory).last_retrieved_at == now
    recall_module._stamp(alice.pk, [memory.pk], now + timedelta(hours=3))
    assert RetrievalStamp.objects.get(memory=memory).last_retrieved_at == now + timedelta(hours=3)
    theirs = make_memory(alice, "Chess cafe.")
    recall_module._stamp(bob.pk, [theirs.pk], now)
    assert not RetrievalStamp.objects.filter(memory=theirs).exists()


@pytest.mark.django_db
def test_it_stamps_nothing_on_a_dry_run(alice):
    memory = make_memory(alice, "Chess club.")
    result = recall(alice, "chess", dry_run=True)
    assert [item.memory.pk for item in result.memories] == [memory.pk]
    memory.refresh_from_db()
    assert memory.last_retrieved_at is None


@pytest.mark.django_db
def test_it_replays_the_store_as_of_a_moment(alice):
    now = timezone.now()
    then = make_memory(alice, "Chess club.", created_at=now - timedelta(days=10))
    make_memory(alice, "Chess tournament.", created_at=now - timedelta(days=1))
    result = recall(alice, "chess", as_of=now - timedelta(days=5), dry_run=True)
    assert [item.memory.pk for item in result.memories] == [then.pk]
    assert result.as_of == now - timedelta(days=5)


@pytest.mark.django_db
def test_it_reads_a_naive_as_of_as_utc(alice):
    result = recall(alice, "chess", as_of=datetime(2026, 1, 1, 12, 0), dry_run=True)
    assert result.as_of.utcoffset() == timedelta(0)


@pytest.mark.django_db
def test_it_filters_types(alice):
    make_memory(alice, "Chess club.", Memory.Type.SEMANTIC)
    event = make_memory(alice, "Chess match yesterday.", Memory.Type.EPISODIC)
    for pipeline in ("fusion", "freshness"):
        result = recall(alice, "chess", types=["episodic"], pipeline=pipeline, dry_run=True)
        assert [item.memory.pk for item in result.memories] == [event.pk]


@pytest.mark.django_db
def test_it_runs_only_the_legs_asked_for(alice):
    make_memory(alice, "Chess with Ann.", entities=["Ann"])
    result = recall(alice, "chess with Ann", legs=["entity"], dry_run=True)
    assert set(result.legs) == {"entity"}
    assert result.memories[0].parts["ranks"] == {"entity": 1}


@pytest.mark.django_db
def test_it_returns_an_empty_block_when_nothing_matches(alice):
    make_memory(alice, "Chess club.")
    result = recall(alice, "the and of", dry_run=True)
    assert (result.memories, result.block, result.block_tokens) == ([], "", 0)
    assert result.legs["text"].status == "ok"


@pytest.mark.django_db
def test_it_serialises_to_json(alice):
    make_memory(alice, "Chess with Ann.", entities=["Ann"], embedding=axis(1))
    result = recall(alice, "chess Ann", query_embedding=axis(1), explain=True, dry_run=True)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["pipeline"] == "fusion"
    assert data["memories"][0]["score_parts"]["ranks"] == {"vector": 1, "text": 1, "entity": 1}
    assert data["memories"][0]["position"] == 0
    assert set(data["legs"]) == {"vector", "text", "entity"}
    assert data["cut"] == []


@pytest.mark.django_db
def test_it_reports_a_failing_embedding_provider_as_a_failed_leg(alice, monkeypatch):
    make_memory(alice, "Chess club.", embedding=axis(0))

    class Broken:
        name = "broken"
        dimensions = 384

        def embed(self, texts, *, timeout=None):
            raise RuntimeError("provider down")

    monkeypatch.setattr(recall_module, "_embedding_provider", lambda: Broken())
    result = recall(alice, "chess", dry_run=True)
    assert result.legs["vector"].status == "failed"
    assert "provider down" in result.legs["vector"].error
    assert len(result.memories) == 1


@pytest.mark.django_db
def test_it_skips_the_vector_leg_without_a_provider(alice):
    make_memory(alice, "Chess club.", embedding=axis(0))
    result = recall(alice, "chess", dry_run=True)
    assert result.legs["vector"].status == "skipped"
    assert result.legs["vector"].error == "no embedding provider configured"


@pytest.mark.django_db(transaction=True)
def test_it_gives_up_at_the_recall_timeout(alice, settings, monkeypatch):
    settings.RECALL_TIMEOUT = 0.3

    def slow(cursor, request):
        cursor.execute("SELECT pg_sleep(2)")
        return []

    for name in legs.LEG_FUNCTIONS:
        monkeypatch.setitem(legs.LEG_FUNCTIONS, name, slow)
    with pytest.raises(RecallFailed) as failure:
        recall(alice, "chess", query_embedding=axis(0))
    assert {report.status for report in failure.value.legs.values()} == {"timeout"}


@pytest.mark.django_db
def test_it_fails_the_freshness_pipeline_when_bm25_fails(alice, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("bm25 down")

    monkeypatch.setattr("retrieval.freshness.bm25_scores", broken)
    with pytest.raises(RecallFailed, match="bm25 down"):
        recall(alice, "chess", pipeline="freshness")


@pytest.mark.django_db
def test_it_restamps_at_most_once_per_granularity(alice):
    now = timezone.now()
    recent = make_memory(alice, "Chess club.", last_retrieved_at=now - timedelta(minutes=10))
    stale = make_memory(alice, "Chess cafe.", last_retrieved_at=now - timedelta(hours=2))
    recall(alice, "chess")
    rows = Memory.objects.in_bulk([recent.pk, stale.pk])
    assert rows[recent.pk].last_retrieved_at == recent.last_retrieved_at
    assert rows[stale.pk].last_retrieved_at > now
