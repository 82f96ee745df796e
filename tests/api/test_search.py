from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory
from tests.base import make_memory

SEARCH = "/v1/memories/search"


@pytest.fixture
def seats(alice):
    return make_memory(
        alice,
        "Alice prefers an aisle seat on long-haul flights.",
        Memory.Type.PREFERENCE,
        entities=["flights"],
    )


def test_it_returns_memories_and_the_fenced_block(alice_api, seats):
    response = alice_api.post(SEARCH, {"query": "Which seat do I like on long flights?"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [m["id"] for m in body["memories"]] == [seats.pk]
    assert body["memories"][0]["content"] == seats.content
    assert body["block"].startswith('<memory source="timothy-memory" trust="data">')
    assert body["block"].rstrip().endswith("</memory>")
    assert "- [preference] Alice prefers an aisle seat" in body["block"]
    assert 0 < body["block_tokens"] <= body["token_budget"]
    assert body["pipeline"] == "fusion"
    assert set(body["legs"]) == {"vector", "text", "entity"}
    assert body["legs"]["text"]["status"] == "ok"
    assert body["legs"]["text"]["count"] >= 1
    assert {"status", "ms", "count"} <= set(body["legs"]["entity"])


def test_it_stamps_retrieval_but_not_confirmation(alice_api, seats):
    confirmed = seats.last_confirmed_at
    alice_api.post(SEARCH, {"query": "aisle seat"})
    seats.refresh_from_db()
    assert seats.last_retrieved_at is not None
    assert seats.last_confirmed_at == confirmed


def test_it_keeps_to_the_token_budget(alice_api, alice):
    for n in range(30):
        make_memory(alice, f"Alice visited museum number {n} in Paris and loved the paintings.")
    body = alice_api.post(SEARCH, {"query": "museum Paris paintings", "token_budget": 120}).json()
    assert body["token_budget"] == 120
    assert body["block_tokens"] <= 120
    assert 0 < len(body["memories"]) < 30


def test_it_runs_the_freshness_pipeline(alice_api, seats):
    body = alice_api.post(SEARCH, {"query": "aisle seat", "pipeline": "freshness"}).json()
    assert body["pipeline"] == "freshness"
    assert [m["id"] for m in body["memories"]] == [seats.pk]


def test_it_filters_by_type(alice_api, alice, seats):
    make_memory(alice, "Alice flew to Tokyo in an aisle seat last May.", Memory.Type.EPISODIC)
    body = alice_api.post(SEARCH, {"query": "aisle seat", "types": ["episodic"]}).json()
    assert [m["type"] for m in body["memories"]] == ["episodic"]


def test_it_searches_as_of_a_past_moment(alice_api, alice):
    now = timezone.now()
    make_memory(alice, "Alice lives in Lyon.", created_at=now - timedelta(days=10))
    make_memory(alice, "Alice lives in Paris now.", created_at=now - timedelta(days=1))
    as_of = (now - timedelta(days=5)).isoformat()
    body = alice_api.post(SEARCH, {"query": "Where does Alice live?", "as_of": as_of}).json()
    assert [m["content"] for m in body["memories"]] == ["Alice lives in Lyon."]


def test_it_explains_what_was_cut(alice_api, alice):
    for n in range(10):
        make_memory(alice, f"Alice owns a red bicycle number {n} with a basket.")
    body = alice_api.post(
        SEARCH, {"query": "red bicycle basket", "token_budget": 80, "explain": True}
    ).json()
    assert body["cut"]
    assert {item["cut_reason"] for item in body["cut"]} <= {"below_min_score", "over_budget"}
    assert "cut" not in alice_api.post(SEARCH, {"query": "red bicycle"}).json()


def test_it_reads_active_memories_only(alice_api, alice):
    make_memory(alice, "Alice's staged fact about kayaks.", status=Memory.Status.PROPOSED)
    make_memory(alice, "Alice's archived fact about kayaks.", status=Memory.Status.ARCHIVED)
    body = alice_api.post(SEARCH, {"query": "kayaks"}).json()
    assert body["memories"] == []
    assert "kayak" not in body["block"]


def test_it_answers_503_when_nothing_could_be_searched(alice_api, seats, settings):
    settings.RECALL_TIMEOUT = 0
    response = alice_api.post(SEARCH, {"query": "aisle seat"})
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "retrieval_unavailable"
    assert set(error["details"]["legs"]) == {"vector", "text", "entity"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 5}, "query"),
        ({"query": "x\u0000y"}, "query"),
        ({"query": "x", "token_budget": 0}, "token_budget"),
        ({"query": "x", "token_budget": 10**9}, "token_budget"),
        ({"query": "x", "token_budget": "100"}, "token_budget"),
        ({"query": "x", "token_budget": 12.5}, "token_budget"),
        ({"query": "x", "pipeline": "magic"}, "pipeline"),
        ({"query": "x", "types": []}, "types"),
        ({"query": "x", "types": ["gossip"]}, "types"),
        ({"query": "x", "types": "semantic"}, "types"),
        ({"query": "x", "as_of": "yesterday"}, "as_of"),
        ({"query": "x", "as_of": 1700000000}, "as_of"),
        ({"query": "x", "explain": "yes"}, "explain"),
        ({"query": "x", "legs": ["text"]}, "legs"),
    ],
)
def test_it_rejects_a_bad_search_body(alice_api, body, field):
    response = alice_api.post(SEARCH, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["details"]


def test_it_says_where_the_time_went_in_a_server_timing_header(alice_api, seats):
    response = alice_api.post(SEARCH, {"query": "Which seat do I like on long flights?"})
    assert response.status_code == 200, response.text
    stages = dict(
        part.strip().split(";dur=") for part in response.headers["Server-Timing"].split(",")
    )
    assert {"embed", "legs", "fuse", "pack", "leg-text", "leg-entity", "recall"} <= set(stages)
    assert float(stages["recall"]) == pytest.approx(response.json()["ms"], abs=0.01)
    assert float(stages["leg-text"]) == pytest.approx(
        response.json()["legs"]["text"]["ms"], abs=0.01
    )


@pytest.mark.django_db
def test_the_search_api_replays_the_past(alice_api, alice):
    old = Memory.remember(alice, "Ana lives in Lisbon.", Memory.Type.SEMANTIC)
    Memory.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=30),
        active_since=timezone.now() - timedelta(days=30),
    )
    old.supersede("Ana lives in Porto.")
    response = alice_api.post(
        "/v1/memories/search",
        {
            "query": "Where does Ana live?",
            "as_of": (timezone.now() - timedelta(days=2)).isoformat(),
        },
    )
    assert response.status_code == 200
    assert [item["content"] for item in response.json()["memories"]] == ["Ana lives in Lisbon."]
