"""The statements a search through the API sends, counted so that none creeps back in.

Every statement costs both sides CPU (about 0.3 ms of PostgreSQL's and as much
of the web worker's beyond its own work: docs/reliability.md, throughput), so
the count is pinned: each one here is a step of the search, and a new one
should be a decision. Counted at psycopg's cursor, so the statements sent
outside Django's cursor wrapper (the candidates' binary read) count too.
Under test every leg, the stamp and the access record run inline, on the
request's connection; savepoints (a leg's own transaction) are left out.
"""

from __future__ import annotations

import re

import psycopg
import pytest
from django.test import Client

from memories.models import ApiToken, Memory
from tests.base import make_memory

SEARCH = "/v1/memories/search"
SAVEPOINT = re.compile(r"^\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)\b", re.I)


@pytest.fixture
def statements(monkeypatch):
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counting(cursor, query, *args, **kwargs):
        text = query if isinstance(query, str) else str(query)
        if not SAVEPOINT.match(text):
            sent.append(" ".join(text.split()))
        return execute(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    return sent


def _kind(text: str) -> str:
    for needle, kind in (
        ('apitoken" t JOIN', "token"),
        ('UPDATE "memories_apitoken"', "token last used"),
        ('INSERT INTO "timothy_rate_limit"', "rate limit"),
        ('DELETE FROM "timothy_rate_limit"', "rate limit: ended windows"),
        ("set_config", "leg timeout"),
        ("to_tsvector", "lexemes and corpus sums"),
        ("FROM retrieval_ownercorpuschange", "corpus sums"),
        ("retrieval_ownerentity", "names in the query"),
        ("array_send(array_agg(t.memory_id))", "postings"),
        ("INSERT INTO memories_retrievalstamp", "stamps"),
        ("SELECT m.id, m.owner_id", "candidates"),
        ("memories_accessrecord", "access record"),
    ):
        if needle in text:
            return kind
    return text


def test_a_search_sends_one_statement_a_step(alice, settings, statements):
    settings.EMBEDDING_PROVIDER = "none"
    make_memory(
        alice,
        "Alice prefers an aisle seat on long-haul flights.",
        Memory.Type.PREFERENCE,
        entities=["flights"],
    )
    token = ApiToken.issue(alice, "statements")[1]
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")
    statements.clear()
    response = client.post(
        SEARCH, {"query": "Which seat do I like on flights?"}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert [m["content"] for m in response.json()["memories"]] == [
        "Alice prefers an aisle seat on long-haul flights."
    ]
    assert [_kind(text) for text in statements] == [
        "token",
        # At most once a minute (here the token's first use), and once a minute.
        "token last used",
        "rate limit",
        "rate limit: ended windows",
        # The text leg (inline under test, so its timeout is set and put back).
        "leg timeout",
        "leg timeout",
        "lexemes and corpus sums",
        "postings",
        "leg timeout",
        # The entity leg: the names the query holds, then (one found) the
        # corpus' size and the name's postings. No vector leg: no embeddings.
        "leg timeout",
        "names in the query",
        "corpus sums",
        "postings",
        "leg timeout",
        "candidates",
        "stamps",
        "access record",
    ]


def test_a_create_asks_nothing_of_the_new_memory_s_stamp(alice, settings, statements):
    settings.EMBEDDING_PROVIDER = "none"
    token = ApiToken.issue(alice, "statements")[1]
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")
    statements.clear()
    response = client.post(
        "/v1/memories",
        {"content": "Alice keeps bees.", "type": "semantic", "mode": "remember"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["last_retrieved_at"] is None
    # A row written just now has never been retrieved.
    assert not [text for text in statements if "memories_retrievalstamp" in text], statements
