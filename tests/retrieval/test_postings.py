"""Postings, the text and entity legs' inverted index (retrieval 0004).

After every kind of write the trigger-kept postings must equal what
``index.rebuild()`` builds from scratch, and the legs that read
them must rank exactly as the same SQL over the memory rows did.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from retrieval import bm25, index
from retrieval.bm25 import REFERENCE_TIME_SQL, bm25_scores
from retrieval.constants import BM25_K1, TEXT_BM25_B
from retrieval.legs import LegRequest, entity_candidates, entity_leg
from retrieval.lexemes import query_lexemes
from retrieval.models import Posting
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def postings() -> set[tuple]:
    return set(
        Posting.objects.values_list(
            "owner_id",
            "kind",
            "term",
            "memory_id",
            "frequency",
            "length",
            "type",
            "created_at",
            "last_confirmed_at",
        )
    )


def assert_matches_rebuild() -> set[tuple]:
    kept = postings()
    index.rebuild()
    assert kept == postings()
    return kept


def terms(memory: Memory, kind: str = Posting.Kind.LEXEME) -> set[str]:
    found = Posting.objects.filter(memory_id=memory.pk, kind=kind)
    return set(found.values_list("term", flat=True))


def test_it_indexes_active_memories_only(alice):
    active = make_memory(alice, "Coffee, coffee and more coffee in Lisbon", entities=["Lisbon"])
    make_memory(alice, "Tea in Porto", entities=["Porto"], status=Memory.Status.PROPOSED)
    make_memory(alice, "Tea in Rome", entities=["Rome"], status=Memory.Status.ARCHIVED)

    kept = assert_matches_rebuild()
    assert {row[3] for row in kept} == {active.pk}
    assert terms(active) == {"coffe", "lisbon"}
    assert terms(active, Posting.Kind.ENTITY) == {"lisbon"}
    coffee = Posting.objects.get(memory_id=active.pk, kind="l", term="coffe")
    assert (coffee.frequency, coffee.length) == (3, 2)


def test_it_indexes_a_multi_row_insert(alice, bob):
    statuses = [Memory.Status.ACTIVE, Memory.Status.PROPOSED, Memory.Status.ARCHIVED]
    Memory.objects.bulk_create(
        Memory(
            owner=alice if i % 3 else bob,
            type=Memory.Type.SEMANTIC,
            content=f"word{i % 5} shared words here",
            status=statuses[i % 3],
            entity_refs=[f"E{i % 7}", "Shared", "shared", ""],
        )
        for i in range(200)
    )

    kept = assert_matches_rebuild()
    active = Memory.objects.filter(status=Memory.Status.ACTIVE)
    assert len({row[3] for row in kept}) == active.count()
    shared = [row for row in kept if row[1] == "e" and row[2] == "shared"]
    assert len(shared) == active.count()  # once per memory however it is spelled
    assert not [row for row in kept if row[1] == "e" and row[2] == ""]


def test_it_follows_every_state_change(alice):
    first = Memory.remember(alice, "Aisle seats please", Memory.Type.PREFERENCE, entities=["Ann"])
    proposal = Memory.propose(alice, "Ann likes espresso", Memory.Type.SEMANTIC, entities=["Ann"])
    rejected = Memory.propose(alice, "Rome in May", Memory.Type.SEMANTIC, entities=["Rome"])
    assert {row[3] for row in assert_matches_rebuild()} == {first.pk}

    proposal.confirm()
    rejected.reject()
    assert {row[3] for row in assert_matches_rebuild()} == {first.pk, proposal.pk}

    before = Posting.objects.filter(memory_id=proposal.pk).values_list("last_confirmed_at")
    assert set(before) == {(proposal.last_confirmed_at,)}
    proposal.reconfirm()
    proposal.refresh_from_db()
    after = Posting.objects.filter(memory_id=proposal.pk).values_list("last_confirmed_at")
    assert set(after) == {(proposal.last_confirmed_at,)}
    assert_matches_rebuild()

    second = first.supersede("Window seats now", entities=["Ann", "Lisbon"])
    assert terms(second) == {"window", "seat"}
    assert not terms(first)
    merged = Memory.merge([second, proposal], "Window seats in Lisbon")
    kept = assert_matches_rebuild()
    assert {row[3] for row in kept} == {merged.pk}
    merged.archive()
    assert not assert_matches_rebuild()


def test_it_applies_a_multi_row_status_change_at_once(alice, bob):
    for i in range(30):
        make_memory(alice if i % 2 else bob, f"tea number{i}", entities=["Tea"])

    Memory.objects.filter(owner=alice, content__in=["tea number1", "tea number3"]).update(
        status=Memory.Status.ARCHIVED
    )

    kept = assert_matches_rebuild()
    assert len({row[3] for row in kept if row[0] == alice.pk}) == 13
    assert len({row[3] for row in kept if row[0] == bob.pk}) == 15


def test_it_leaves_postings_alone_on_updates_of_other_columns(alice):
    for i in range(5):
        make_memory(alice, f"tea number{i}", entities=["Tea"])

    def versions():
        with connection.cursor() as cursor:
            cursor.execute("SELECT term, memory_id, ctid::text FROM retrieval_posting")
            return set(cursor.fetchall())

    before = versions()
    Memory.objects.filter(owner=alice).update(confidence=0.3)
    Memory.objects.filter(owner=alice).update(status=Memory.Status.ACTIVE)

    assert versions() == before  # not even rewritten with the same values


# --- the legs rank as they did over the memory rows --------------------------------


def memory_row_bm25(owner_id, query, as_of, types=None, top=30, b=TEXT_BM25_B):
    """The text leg's BM25 as it was computed before postings: over the memory rows."""
    with connection.cursor() as cursor:
        lexemes = query_lexemes(cursor, query)
        cursor.execute(
            f"""
            WITH corpus AS (
                SELECT count(*)::float8 AS documents,
                       greatest(coalesce(avg(length(m.tsv)), 0)::float8, 1) AS average_length
                FROM memories_memory m
                WHERE m.owner_id = %(owner_id)s AND m.status = 'active'
                  AND m.created_at <= %(as_of)s
            ),
            matched AS MATERIALIZED (
                SELECT m.id, m.type, m.tsv, {REFERENCE_TIME_SQL} AS reference_time
                FROM memories_memory m
                WHERE m.owner_id = %(owner_id)s AND m.status = 'active'
                  AND m.created_at <= %(as_of)s
                  AND tsvector_to_array(m.tsv) && %(lexemes)s::text[]
            ),
            postings AS (
                SELECT o.id, o.type, o.reference_time, length(o.tsv) AS length, t.lexeme,
                       coalesce(array_length(t.positions, 1), 1) AS frequency
                FROM matched o CROSS JOIN LATERAL unnest(o.tsv) AS t
                WHERE t.lexeme = ANY(%(lexemes)s::text[])
            ),
            containing AS (
                SELECT lexeme, count(*)::float8 AS documents FROM postings GROUP BY lexeme
            )
            SELECT p.id, sum(
                ln(1 + (c.documents - n.documents + 0.5) / (n.documents + 0.5))
                * p.frequency * (%(k1)s + 1)
                / (p.frequency + %(k1)s * (1 - %(b)s + %(b)s * p.length / c.average_length))
            ) AS score
            FROM postings p JOIN containing n USING (lexeme) CROSS JOIN corpus c
            {"WHERE p.type = ANY(%(types)s)" if types else ""}
            GROUP BY p.id
            -- Equal in exact arithmetic is equal here, whatever order the
            -- shares were added in: the newer memory first.
            ORDER BY round(sum(
                ln(1 + (c.documents - n.documents + 0.5) / (n.documents + 0.5))
                * p.frequency * (%(k1)s + 1)
                / (p.frequency + %(k1)s * (1 - %(b)s + %(b)s * p.length / c.average_length))
            )::numeric, 9) DESC, max(p.reference_time) DESC, p.id DESC
            LIMIT %(top)s
            """,
            {
                "owner_id": owner_id,
                "as_of": as_of,
                "lexemes": lexemes,
                "k1": BM25_K1,
                "b": b,
                "top": top,
                "types": list(types or ()),
            },
        )
        return [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]


def memory_row_entities(owner_id, query, as_of, types=None, limit=30):
    """The entity leg's ranking as it was computed before postings: over the memory rows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, memories FROM retrieval_ownerentity WHERE owner_id = %s AND memories > 0",
            [owner_id],
        )
        dictionary = dict(cursor.fetchall())
        stretches = {stretch.lower() for stretch in entity_candidates(query)}
        named = {key: count for key, count in dictionary.items() if key in stretches}
        if not named:
            return []
        cursor.execute(
            f"""
            SELECT m.id FROM memories_memory m
            CROSS JOIN LATERAL (
                SELECT count(*) AS matched, min(w.memories) AS rarest
                FROM (SELECT DISTINCT lower(ref) FROM unnest(m.entity_refs) AS ref) AS k(key)
                JOIN unnest(%(keys)s::text[], %(counts)s::int[]) AS w(key, memories) USING (key)
            ) AS named
            WHERE m.owner_id = %(owner_id)s AND m.status = 'active'
              AND m.created_at <= %(as_of)s
              {"AND m.type = ANY(%(types)s)" if types else ""}
              AND named.matched > 0
            ORDER BY named.matched DESC, named.rarest ASC, {REFERENCE_TIME_SQL} DESC, m.id DESC
            LIMIT %(limit)s
            """,
            {
                "owner_id": owner_id,
                "as_of": as_of,
                "keys": list(named),
                "counts": list(named.values()),
                "types": list(types or ()),
                "limit": limit,
            },
        )
        return [row[0] for row in cursor.fetchall()]


WORDS = ["coffee", "espresso", "seat", "aisle", "window", "flight", "Lisbon", "Ann"]
WORDS += ["piano", "lesson", "garden", "tomato"]
NAMES = ["Ann", "Ben", "Chloe", "Lisbon", "Porto"]
QUERIES = [
    "What do I like, coffee or espresso?",
    "Which seat on a flight: aisle or window?",
    "Anything about Ann and Ben in Lisbon?",
    "piano lesson with Chloe",
    "garden garden tomato Porto",
    "Ann",
]


@pytest.fixture
def corpus(alice, bob):
    """Memories with repeated words, equal scores, every type, all ages, a neighbour."""
    picker = random.Random(5)
    now = timezone.now()
    statuses = [Memory.Status.ACTIVE] * 8 + [Memory.Status.ARCHIVED, Memory.Status.PROPOSED]
    for i in range(240):
        created = now - timedelta(days=picker.randint(0, 400))
        confirmed = created + timedelta(days=picker.randint(0, 60)) if i % 4 else None
        make_memory(
            alice if i % 5 else bob,
            " ".join(picker.choice(WORDS) for _ in range(picker.randint(1, 6))),
            picker.choice(list(Memory.Type)),
            status=picker.choice(statuses),
            entities=picker.sample(NAMES, picker.randint(0, 3)),
            created_at=created,
            last_confirmed_at=confirmed,
        )
    return now


@pytest.fixture(params=["dates with the postings", "dates of ties read apart"])
def tie_dates(request, monkeypatch):
    """Both ways BM25 gets the dates that order equal scores (by the owner's size)."""
    deferred = request.param == "dates of ties read apart"
    monkeypatch.setattr(bm25, "BM25_DEFERRED_DATES", 0 if deferred else 10**9)
    return request.param


@pytest.mark.parametrize("query", QUERIES)
def test_it_ranks_by_bm25_exactly_as_over_the_memory_rows(alice, corpus, query, tie_dates):
    for as_of in (corpus, corpus - timedelta(days=30), corpus - timedelta(days=200)):
        for types in (None, ("semantic", "episodic")):
            expected = memory_row_bm25(alice.pk, query, as_of, types)
            with connection.cursor() as cursor:
                got = bm25_scores(
                    cursor, alice.pk, query, as_of, types=types, top=30, b=TEXT_BM25_B
                )
            assert [memory_id for memory_id, _ in got] == [m for m, _ in expected]
            assert [score for _, score in got] == pytest.approx([s for _, s in expected])
            assert got, "the corpus must give every query something to rank"


@pytest.mark.parametrize("query", QUERIES)
def test_it_ranks_entities_exactly_as_over_the_memory_rows(alice, corpus, query):
    for as_of in (corpus, corpus - timedelta(days=200)):
        for types in (None, ("preference", "semantic")):
            request = LegRequest(owner_id=alice.pk, query=query, as_of=as_of, types=types)
            expected = memory_row_entities(alice.pk, query, as_of, types)
            with connection.cursor() as cursor:
                found = entity_leg(cursor, request)
            assert [memory_id for memory_id, _ in found] == expected


@pytest.fixture
def skewed(alice, bob):
    """A few rare words among very common ones, many memories alike: where adding
    up tens of shares per memory must still order ties exactly."""
    picker = random.Random(9)
    now = timezone.now()
    common = ["prefer", "usually", "always", "like"]
    rare = ["espresso", "tomato", "piano", "Lisbon", "aisle"]
    rows = []
    for i in range(900):
        words = picker.sample(common, picker.randint(1, 3))
        if picker.random() < 0.08:
            words += picker.sample(rare, picker.randint(1, 2))
        words *= 1 + (i % 7 == 0)  # some repeat themselves
        created = now - timedelta(days=picker.randint(0, 400))
        rows.append(
            Memory(
                owner=alice if i % 9 else bob,
                type=picker.choice(list(Memory.Type)),
                content=" ".join(words),
                status=Memory.Status.ACTIVE if i % 10 else Memory.Status.ARCHIVED,
                created_at=created,
                last_confirmed_at=created + timedelta(days=i % 40) if i % 3 else None,
            )
        )
    Memory.objects.bulk_create(rows)
    return now


SKEWED_QUERIES = [
    "Do I usually prefer espresso?",
    "I always like tomato and piano",
    "aisle in Lisbon, as I prefer",
    "prefer usually always like",
    "espresso",
]


@pytest.mark.parametrize("query", SKEWED_QUERIES)
def test_it_ranks_a_skewed_corpus_exactly_as_over_the_memory_rows(alice, skewed, query, tie_dates):
    for as_of in (skewed, skewed - timedelta(days=100)):
        for types in (None, ("semantic", "preference")):
            for top, b in ((30, TEXT_BM25_B), (20, 0.75), (5, TEXT_BM25_B)):
                expected = memory_row_bm25(alice.pk, query, as_of, types, top=top, b=b)
                with connection.cursor() as cursor:
                    got = bm25_scores(cursor, alice.pk, query, as_of, types=types, top=top, b=b)
                assert [memory_id for memory_id, _ in got] == [m for m, _ in expected]
                assert [score for _, score in got] == pytest.approx([s for _, s in expected])
                assert got
