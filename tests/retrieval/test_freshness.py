import math
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval.bm25 import bm25_scores
from retrieval.freshness import (
    Candidate,
    blend,
    bm25_order,
    freshness,
    freshness_pipeline,
    min_max,
)
from retrieval.recall import recall
from tests.base import make_memory
from tests.retrieval.helpers import axis, vector

AS_OF = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TSVECTOR_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


def unsaved(pk: int, type: str = "semantic", days: float = 0.0) -> Memory:
    created = AS_OF - timedelta(days=days)
    return Memory(pk=pk, owner_id=1, type=type, content="x", created_at=created)


# --- BM25 -----------------------------------------------------------------------


def independent_bm25(owner, query: str) -> dict[int, float]:
    """BM25 from the stored tsvectors, parsed and scored here in Python."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [query])
        terms = set(cursor.fetchone()[0])
        cursor.execute(
            "SELECT id, tsv::text FROM memories_memory WHERE owner_id = %s AND status = 'active'",
            [owner.pk],
        )
        documents = {}
        for memory_id, text in cursor.fetchall():
            frequencies = {}
            for lexeme, positions in TSVECTOR_ENTRY.findall(text):
                frequencies[lexeme.replace("''", "'")] = len(positions.split(","))
            documents[memory_id] = frequencies
    total = len(documents)
    # A memory's length: its distinct lexemes (what length(tsv) counts).
    average = sum(len(f) for f in documents.values()) / total
    scores = {}
    for memory_id, frequencies in documents.items():
        length = len(frequencies)
        score = 0.0
        for term in terms & frequencies.keys():
            containing = sum(1 for f in documents.values() if term in f)
            idf = math.log(1 + (total - containing + 0.5) / (containing + 0.5))
            tf = frequencies[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / average))
        if score:
            scores[memory_id] = score
    return scores


@pytest.mark.django_db
def test_it_scores_bm25_like_an_independent_computation(alice, bob):
    texts = [
        "I prefer an aisle seat on long-haul flights.",
        "Flights to Tokyo are long; the seat matters on long flights.",
        "My birthday is on the 3rd of March.",
        "The cat's name is O'Malley and she sleeps on the seat.",
        "Long walks, long talks, long evenings.",
        "Nothing relevant here at all.",
    ]
    for text in texts:
        make_memory(alice, text)
    make_memory(alice, "seat seat seat flights", status=Memory.Status.ARCHIVED)
    make_memory(bob, "seat flights long seat flights long")
    query = "Which seat on long flights? O'Malley's birthday!"
    with connection.cursor() as cursor:
        scores = dict(bm25_scores(cursor, alice.pk, query, timezone.now()))
    expected = independent_bm25(alice, query)
    assert scores.keys() == expected.keys()
    for memory_id, score in expected.items():
        assert scores[memory_id] == pytest.approx(score, rel=1e-9)


@pytest.mark.django_db
def test_it_keeps_the_top_twenty_best_first(alice):
    for i in range(25):
        make_memory(alice, "tennis " * (i + 1) + "club")
    with connection.cursor() as cursor:
        scores = bm25_scores(cursor, alice.pk, "tennis", timezone.now())
    assert len(scores) == 20
    assert [score for _, score in scores] == sorted((score for _, score in scores), reverse=True)


@pytest.mark.django_db
def test_it_gives_bm25_nothing_for_stop_words(alice):
    make_memory(alice, "the and of")
    with connection.cursor() as cursor:
        assert bm25_scores(cursor, alice.pk, "the and of", timezone.now()) == []


# --- blend ----------------------------------------------------------------------


def test_it_halves_freshness_at_the_types_half_life():
    assert freshness(unsaved(1, "semantic", days=7), AS_OF) == pytest.approx(0.5)
    assert freshness(unsaved(1, "reflection", days=28), AS_OF) == pytest.approx(0.25)
    assert freshness(unsaved(1, "preference", days=30), AS_OF) == pytest.approx(0.5)
    assert freshness(unsaved(1, "episodic", days=3), AS_OF) == pytest.approx(0.5)


def test_it_scales_min_max_and_all_equal_to_one():
    assert min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert min_max([0.3, 0.3]) == [1.0, 1.0]


def test_it_blends_seventy_thirty_and_resorts():
    candidates = [
        Candidate(unsaved(1, days=28), bm25=9.0, cosine=0.9),
        Candidate(unsaved(2, days=0), bm25=5.0, cosine=0.85),
        Candidate(unsaved(3, days=7), bm25=4.0, cosine=0.5),
    ]
    # relevance 0.9, 0.85, 0.5 → 1, 0.875, 0
    # freshness 1/16, 1, 1/2 → 0, 1, 0.4666…
    scored = blend(candidates, AS_OF)
    assert [item.memory.pk for item in scored] == [2, 1, 3]
    assert [item.score for item in scored] == pytest.approx([0.9125, 0.7, 0.14])
    assert scored[0].parts["relevance_norm"] == pytest.approx(0.875)
    assert scored[2].parts["freshness_norm"] == pytest.approx(0.4666666667)


def test_it_keeps_the_bm25_order_unblended_when_not_reranked():
    candidates = [
        Candidate(unsaved(1, days=60), bm25=6.0, cosine=0.6),
        Candidate(unsaved(2, days=0), bm25=5.0, cosine=0.55),
        Candidate(unsaved(3, days=30), bm25=2.0, cosine=0.2),
    ]
    scored = bm25_order(candidates)
    # The blend would put the fresh #2 first; the keyword results stand alone.
    assert [item.memory.pk for item in blend(candidates, AS_OF)][0] == 2
    assert [item.memory.pk for item in scored] == [1, 2, 3]
    assert [item.score for item in scored] == pytest.approx([1.0, 0.75, 0.0])
    assert "freshness" not in scored[0].parts


# --- pipeline -------------------------------------------------------------------


@pytest.mark.django_db
def test_it_lets_a_fresh_weaker_match_overtake_a_stale_perfect_one(alice):
    now = timezone.now()
    stale = make_memory(
        alice,
        "Alice's favourite tennis racket is the Wilson Blade.",
        created_at=now - timedelta(days=60),
        embedding=vector((0, 1.0)),
    )
    fresh = make_memory(
        alice,
        "Alice bought a new tennis racket.",
        created_at=now - timedelta(hours=1),
        embedding=vector((0, 1.0), (1, 0.3)),
    )
    make_memory(
        alice,
        "Alice's tennis coach.",
        created_at=now - timedelta(days=3),
        embedding=vector((0, 1.0), (2, 1.5)),
    )
    query = "favourite tennis racket"
    scored, reports = freshness_pipeline(
        alice.pk,
        query,
        now,
        types=None,
        query_embedding=axis(0),
        embedder=None,
        timeout=3.0,
    )
    assert reports["rerank"].status == "ok"
    by_id = {item.memory.pk: item for item in scored}
    # The stale one is the best match on both relevance signals …
    assert by_id[stale.pk].parts["bm25"] > by_id[fresh.pk].parts["bm25"]
    assert by_id[stale.pk].parts["cosine"] > by_id[fresh.pk].parts["cosine"]
    # … and still comes second.
    assert [item.memory.pk for item in scored][:2] == [fresh.pk, stale.pk]
    result = recall(alice, query, pipeline="freshness", query_embedding=axis(0), dry_run=True)
    assert [item.memory.pk for item in result.memories][:2] == [fresh.pk, stale.pk]


@pytest.mark.django_db
def test_it_reranks_by_cosine_and_keeps_five(alice):
    ids = [
        make_memory(alice, f"tennis note {i}", embedding=vector((0, 1.0), (1, i * 0.2))).pk
        for i in range(8)
    ]
    now = timezone.now()
    scored, reports = freshness_pipeline(
        alice.pk, "tennis", now, types=None, query_embedding=axis(0), embedder=None, timeout=3.0
    )
    assert reports["rerank"].ranked_ids == ids[:5]
    assert sorted(item.memory.pk for item in scored) == sorted(ids[:5])


@pytest.mark.django_db
def test_it_falls_back_to_bm25_order_without_embeddings(alice):
    now = timezone.now()
    strong = make_memory(alice, "tennis tennis tennis", created_at=now - timedelta(days=1))
    weak = make_memory(
        alice, "tennis and many other words here", created_at=now - timedelta(days=1)
    )
    scored, reports = freshness_pipeline(
        alice.pk, "tennis", now, types=None, query_embedding=None, embedder=None, timeout=3.0
    )
    assert reports["rerank"].status == "skipped"
    assert reports["bm25"].ranked_ids == [strong.pk, weak.pk]
    assert [item.memory.pk for item in scored] == [strong.pk, weak.pk]
    assert scored[0].parts["relevance"] == scored[0].parts["bm25"]
    assert [item.score for item in scored] == pytest.approx([1.0, 0.0])


@pytest.mark.django_db
def test_it_does_not_let_freshness_reorder_the_bm25_fallback(alice):
    now = timezone.now()
    stale = now - timedelta(days=60)
    strong = make_memory(alice, "tennis tennis tennis", created_at=stale)
    nearly = make_memory(alice, "tennis tennis tennis racket", created_at=now)
    weak = make_memory(alice, "tennis and many other words here", created_at=stale)
    scored, reports = freshness_pipeline(
        alice.pk, "tennis", now, types=None, query_embedding=None, embedder=None, timeout=3.0
    )
    assert reports["rerank"].status == "skipped"
    assert reports["bm25"].ranked_ids == [strong.pk, nearly.pk, weak.pk]
    # Blended, the fresh runner-up would overtake the stale leader (0.7 × 0.8 + 0.3
    # against 0.7); without embeddings the keyword results stand alone.
    candidates = [
        Candidate(item.memory, bm25=item.parts["bm25"], cosine=item.parts["bm25"])
        for item in scored
    ]
    assert blend(candidates, now)[0].memory.pk == nearly.pk
    assert [item.memory.pk for item in scored] == [strong.pk, nearly.pk, weak.pk]
    result = recall(alice, "tennis", pipeline="freshness", as_of=now, dry_run=True)
    assert [item.memory.pk for item in result.memories] == [strong.pk, nearly.pk, weak.pk]
