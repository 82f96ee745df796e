import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory
from retrieval import index, legs
from retrieval.constants import ENTITY_SUBSTRING
from retrieval.legs import (
    LegRequest,
    LegSkipped,
    entity_candidates,
    entity_leg,
    run_leg,
    run_legs,
    text_leg,
    vector_leg,
)
from retrieval.models import OwnerEntity
from retrieval.recall import recall
from tests.base import make_memory
from tests.retrieval.helpers import axis, vector

HOSTILE_QUERIES = [
    "it's O'Brien's \"quoted\" 'text'",
    "a & b | c ! d : e * f ( g ) h \\ i",
    "!!! ((( ))) &&& ||| ::: *** \\\\\\",
    "back\\slash\\\\ and 'quote\\'",
    "emoji 🚀🔥 and 🤖 robots",
    "the and of a to is",
    "",
    "   \n\t  ",
    "NUL\x00inside",
    "lone surrogate \ud800 here",
    "'; DROP TABLE memories_memory; --",
    "<memory> </memory> %s %(x)s {0}",
    "aisle " * 2000,
    "x" * 10_000,
    " ".join(f"word{i}" for i in range(1500)),
]


def request_for(owner, query="", **kwargs) -> LegRequest:
    kwargs.setdefault("as_of", timezone.now())
    return LegRequest(owner_id=owner.pk, query=query, **kwargs)


def run(leg, owner, query="", **kwargs) -> list[int]:
    """The ids a leg finds, best first (its scores are tested where they matter)."""
    with connection.cursor() as cursor:
        return [memory_id for memory_id, _ in leg(cursor, request_for(owner, query, **kwargs))]


# --- text -----------------------------------------------------------------------


@pytest.mark.django_db
def test_it_ors_the_query_lexemes(alice):
    seat = make_memory(alice, "I prefer an aisle seat on long-haul flights.")
    birthday = make_memory(alice, "My birthday is on the 3rd of March.")
    make_memory(alice, "The cat likes tuna.")
    found = run(text_leg, alice, "What seat do I prefer on long-haul flights, and my birthday?")
    assert set(found) == {seat.pk, birthday.pk}


@pytest.mark.django_db
def test_it_ranks_by_how_much_of_the_query_a_memory_covers(alice):
    one = make_memory(alice, "Paris is lovely.")
    both = make_memory(alice, "Paris in spring is lovely; spring flowers in Paris.")
    assert run(text_leg, alice, "paris spring") == [both.pk, one.pk]


@pytest.mark.django_db
def test_it_matches_stemmed_words(alice):
    memory = make_memory(alice, "Alice was running marathons.")
    assert run(text_leg, alice, "does she run a marathon?") == [memory.pk]


@pytest.mark.django_db
@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_it_takes_any_text_as_a_query(alice, query):
    memory = make_memory(alice, "An aisle seat, please, and emoji robots.")
    found = run(text_leg, alice, query)
    assert found in ([], [memory.pk])


@pytest.mark.django_db
def test_it_returns_nothing_for_only_stop_words(alice):
    make_memory(alice, "The and of a to is.")
    assert run(text_leg, alice, "the and of a to is") == []


@pytest.mark.django_db
def test_it_finds_lexemes_with_quotes_and_backslashes(alice):
    memory = make_memory(alice, "Path C:\\temp\\o'neil.txt belongs to O'Neil.")
    assert run(text_leg, alice, "o'neil C:\\temp\\o'neil.txt") == [memory.pk]


@pytest.mark.django_db
def test_it_searches_only_the_owners_active_memories(alice, bob):
    mine = make_memory(alice, "Tennis on Sundays.")
    make_memory(bob, "Tennis on Sundays.")
    for status in (Memory.Status.PROPOSED, Memory.Status.REJECTED, Memory.Status.ARCHIVED):
        make_memory(alice, "Tennis on Saturdays.", status=status)
    assert run(text_leg, alice, "tennis") == [mine.pk]


@pytest.mark.django_db
def test_it_filters_types_and_creation_time(alice):
    now = timezone.now()
    fact = make_memory(alice, "Tennis club.", created_at=now - timedelta(days=3))
    make_memory(alice, "Tennis club.", Memory.Type.EPISODIC, created_at=now - timedelta(days=3))
    make_memory(alice, "Tennis club.", created_at=now)
    found = run(
        text_leg,
        alice,
        "tennis",
        types=(Memory.Type.SEMANTIC,),
        as_of=now - timedelta(days=1),
    )
    assert found == [fact.pk]


@pytest.mark.django_db
def test_it_returns_at_most_the_leg_limit(alice):
    Memory.objects.bulk_create(
        Memory(owner=alice, type="semantic", content=f"Tennis note {i}.", status="active")
        for i in range(40)
    )
    assert len(run(text_leg, alice, "tennis")) == 30


# --- entity ---------------------------------------------------------------------


def test_it_finds_word_bounded_stretches():
    candidates = entity_candidates("Ann's annual  New\nYork trip (C++)")
    assert {"Ann", "New York", "C++", "(C++)", "New York trip"} <= candidates
    assert "ann" not in {candidate.lower() for candidate in candidates if candidate != "Ann"}
    assert "annu" not in candidates
    assert "Yor" not in candidates


def test_it_bounds_candidate_length():
    assert all(len(candidate) <= 10 for candidate in entity_candidates("a b c " * 100, 10))


@pytest.mark.django_db
def test_it_matches_entities_case_insensitively_on_word_boundaries(alice):
    ann = make_memory(alice, "Lunch with a friend.", entities=["Ann"])
    make_memory(alice, "A report.", entities=["annual report"])
    make_memory(alice, "Someone else.", entities=["Annabel"])
    assert run(entity_leg, alice, "what did ANN say about the annual budget?") == [ann.pk]
    assert run(entity_leg, alice, "the annual figures") == []


@pytest.mark.django_db
def test_it_matches_multi_word_entities_across_spacing(alice):
    trip = make_memory(alice, "Trip.", entities=["New York"])
    assert run(entity_leg, alice, "flights to new\n  york?") == [trip.pk]


@pytest.mark.django_db
def test_it_ranks_entities_by_count_then_rarity_then_recency(alice):
    now = timezone.now()
    both = make_memory(alice, "a", entities=["Ann", "Paris"], created_at=now - timedelta(days=9))
    rare = make_memory(alice, "b", entities=["Paris"], created_at=now - timedelta(days=8))
    common_old = make_memory(alice, "c", entities=["Ann"], created_at=now - timedelta(days=7))
    common_new = make_memory(alice, "d", entities=["ann"], created_at=now - timedelta(days=1))
    # Ann is named by three memories, Paris by two: Paris is the rarer one.
    assert run(entity_leg, alice, "Ann in Paris") == [
        both.pk,
        rare.pk,
        common_new.pk,
        common_old.pk,
    ]


LONG_NAME = "The " + "Very " * 20 + "Long Charity Name"  # 121 characters


@pytest.mark.django_db
def test_it_matches_entities_anywhere_in_the_query_under_the_seed_profile(alice):
    ann = make_memory(alice, "Lunch with a friend.", entities=["Ann"])
    long = make_memory(alice, "A donation.", entities=[LONG_NAME])
    make_memory(alice, "Someone else.", entities=["Annabel"])
    query = f"the annual report of {LONG_NAME.upper()}"
    # Seed 000: position(lower(name) IN lower(query)), whatever the length.
    assert set(run(entity_leg, alice, query, entity_match=ENTITY_SUBSTRING)) == {
        ann.pk,
        long.pk,
    }
    # Ours: whole words, names up to ENTITY_MAX_CHARS.
    assert run(entity_leg, alice, query) == []
    assert run(entity_leg, alice, "", entity_match=ENTITY_SUBSTRING) == []


@pytest.mark.django_db
def test_it_matches_entities_anywhere_in_the_query_in_a_replay(alice):
    now = timezone.now()
    then = now - timedelta(days=1)
    old = make_memory(
        alice, "A donation.", entities=[LONG_NAME], created_at=now - timedelta(days=3)
    )
    make_memory(alice, "Later.", entities=["Ann"], created_at=now)
    found = run(
        entity_leg, alice, f"annual {LONG_NAME}", as_of=then, replay=True,
        entity_match=ENTITY_SUBSTRING,
    )  # fmt: skip
    assert found == [old.pk]


@pytest.mark.django_db
def test_the_seed_profile_finds_a_long_entity_name_through_recall(alice):
    memory = make_memory(alice, "A donation went out.", entities=[LONG_NAME])
    query = f"what about {LONG_NAME}?"
    seed = recall(alice, query, profile="seed", legs=["entity"], dry_run=True)
    assert [item.memory.pk for item in seed.memories] == [memory.pk]
    default = recall(alice, query, profile="default", legs=["entity"], dry_run=True)
    assert default.memories == []


@pytest.mark.django_db
def test_it_keeps_entities_to_the_owner(alice, bob):
    mine = make_memory(alice, "a", entities=["Ann"])
    make_memory(bob, "b", entities=["Ann"])
    make_memory(alice, "c", entities=["Ann"], status=Memory.Status.ARCHIVED)
    assert run(entity_leg, alice, "Ann") == [mine.pk]


@pytest.mark.django_db
@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_it_takes_any_text_as_an_entity_query(alice, query):
    memory = make_memory(alice, "a", entities=["robots"])
    assert run(entity_leg, alice, query) in ([], [memory.pk])


@pytest.mark.django_db
@pytest.mark.parametrize("leg", [text_leg, entity_leg])
def test_it_reads_postings_through_their_primary_key(alice, leg, monkeypatch):
    Memory.objects.bulk_create(
        Memory(
            owner=alice,
            type="semantic",
            content=f"word{i} and more",
            status="active",
            entity_refs=[f"E{i}"],
        )
        for i in range(1500)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_posting")
    # Every statement the leg sends, Django's cursors and the binary one alike.
    sent: list[tuple[str, object]] = []
    execute = psycopg.Cursor.execute

    def recording(self, query, params=None, **kwargs):
        sent.append((query, params))
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    assert run(leg, alice, "word5 E5")
    monkeypatch.undo()
    reads = [(query, params) for query, params in sent if "retrieval_posting" in str(query)]
    assert reads and not any("memories_memory" in str(query) for query, _ in sent)
    with psycopg.ClientCursor(connection.connection) as cursor:
        for query, params in reads:
            cursor.execute("EXPLAIN " + query, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "retrieval_posting_pk" in plan
            assert "memories_memory" not in plan  # never the wide memory rows


def entity_counts(owner) -> dict[str, int]:
    return dict(
        OwnerEntity.objects.filter(owner=owner, memories__gt=0).values_list("key", "memories")
    )


@pytest.mark.django_db
def test_it_keeps_the_owners_entity_counts_through_every_transition(alice, bob):
    first = Memory.remember(alice, "fact a", "semantic", entities=["Ann", "Paris"])
    proposal = Memory.propose(alice, "fact b", "semantic", entities=["ANN"])
    Memory.remember(bob, "fact c", "semantic", entities=["Ann"])
    assert entity_counts(alice) == {"ann": 1, "paris": 1}
    proposal.confirm()
    assert entity_counts(alice) == {"ann": 2, "paris": 1}
    proposal.reconfirm()
    assert entity_counts(alice) == {"ann": 2, "paris": 1}
    first.supersede("a2", entities=["Ann", "Lisbon"])
    assert entity_counts(alice) == {"ann": 2, "lisbon": 1}
    proposal.archive()
    assert entity_counts(alice) == {"ann": 1, "lisbon": 1}
    assert entity_counts(bob) == {"ann": 1}
    index.rebuild()
    assert entity_counts(alice) == {"ann": 1, "lisbon": 1}


@pytest.mark.django_db
def test_it_ranks_rarity_by_the_dictionary(alice):
    rare = make_memory(alice, "a", entities=["Oslo"])
    common = make_memory(alice, "b", entities=["Bergen"])
    make_memory(alice, "c", entities=["Bergen"])
    make_memory(alice, "d", entities=["Bergen"], status=Memory.Status.ARCHIVED)
    assert entity_counts(alice) == {"oslo": 1, "bergen": 2}
    found = run(entity_leg, alice, "Bergen or Oslo")
    assert found[0] == rare.pk and common.pk in found


# --- vector ---------------------------------------------------------------------


@pytest.mark.django_db
def test_it_orders_by_cosine_distance(alice):
    near = make_memory(alice, "a", embedding=vector((0, 1.0), (1, 0.1)))
    far = make_memory(alice, "b", embedding=vector((0, 1.0), (1, 1.0)))
    make_memory(alice, "c", embedding=axis(5))
    found = run(vector_leg, alice, query_embedding=tuple(axis(0)))
    assert found[:2] == [near.pk, far.pk]


@pytest.mark.django_db
def test_it_skips_without_a_provider_or_vectors(alice):
    make_memory(alice, "no vector")
    with pytest.raises(LegSkipped, match="provider"):
        run(vector_leg, alice)
    with pytest.raises(LegSkipped, match="no embeddings"):
        run(vector_leg, alice, query_embedding=tuple(axis(0)))


@pytest.mark.django_db
def test_it_embeds_the_query_with_the_provider(alice):
    memory = make_memory(alice, "a", embedding=axis(3))

    class Provider:
        name = "test"
        dimensions = len(axis(0))

        def embed(self, texts, *, timeout=None):
            assert texts == ["what?"] and timeout == 3.0
            return [axis(3)]

    assert run(vector_leg, alice, "what?", embedder=Provider(), timeout=3.0) == [memory.pk]


def _bulk_memories(owner, count, embedding, status="active"):
    Memory.objects.bulk_create(
        Memory(
            owner=owner,
            type="semantic",
            content=f"row {i}",
            status=status,
            embedding=embedding(i),
        )
        for i in range(count)
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("exact_max", "min_share", "exact_scans_expected"),
    [
        (0, 0.0, 0),  # through the index
        (10, 0.25, 1),  # above the row threshold, but 1% of the table: exact
    ],
)
def test_it_returns_thirty_among_many_other_owners_rows(
    alice, bob, monkeypatch, exact_max, min_share, exact_scans_expected
):
    # Bob's rows and Alice's archived rows sit right on the query; Alice's 35
    # active rows are further away. Filtering after an ordinary index scan
    # would come back short.
    monkeypatch.setattr(legs, "VECTOR_EXACT_SCAN_MAX_ROWS", exact_max)
    monkeypatch.setattr(legs, "HNSW_MIN_OWNER_SHARE", min_share)
    exact_scans = []
    exact_nearest = legs._exact_nearest
    monkeypatch.setattr(
        legs, "_exact_nearest", lambda *args: exact_scans.append(1) or exact_nearest(*args)
    )
    _bulk_memories(bob, 3000, lambda i: vector((0, 1.0), (1 + i % 300, 0.01)))
    _bulk_memories(alice, 300, lambda i: vector((0, 1.0), (2, 0.02)), status="archived")
    _bulk_memories(alice, 35, lambda i: vector((0, 1.0), (10 + i, 0.5 + i / 100)))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    found = run(vector_leg, alice, query_embedding=tuple(axis(0)))
    mine = set(Memory.objects.filter(owner=alice, status="active").values_list("pk", flat=True))
    assert len(found) == 30
    assert set(found) <= mine
    expected = list(
        Memory.objects.filter(owner=alice, status="active")
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )[:30]
    assert set(found) == set(expected)
    # Through the index, the iterative scan alone found all thirty.
    assert len(exact_scans) == exact_scans_expected


# --- running --------------------------------------------------------------------


def _explode(cursor, request):
    raise RuntimeError("disk on fire")


def _sleep(cursor, request):
    cursor.execute("SELECT pg_sleep(5)")
    return []


@pytest.mark.django_db
def test_it_reports_a_failing_leg(alice, monkeypatch):
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", _explode)
    report = run_leg("text", request_for(alice, "tennis"))
    assert report.status == "failed"
    assert "disk on fire" in report.error
    assert report.ranked_ids == []


@pytest.mark.django_db
def test_it_cancels_a_slow_leg_in_the_database(alice, monkeypatch):
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", _sleep)
    report = run_leg("text", request_for(alice, "tennis", timeout=0.2))
    assert report.status == "timeout"
    # The connection is still usable and the caller's statement timeout is back.
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout')")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.django_db
def test_it_restores_settings_after_an_inline_leg(alice):
    make_memory(alice, "a", embedding=axis(0))
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', '40', true)")
    run_leg("vector", request_for(alice, query_embedding=tuple(axis(0))))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('hnsw.ef_search')"
        )
        assert cursor.fetchone() == ("0", "40")


@pytest.mark.django_db(transaction=True)
def test_it_runs_legs_on_their_own_threads_and_connections(alice, monkeypatch):
    make_memory(alice, "Tennis with Ann.", entities=["Ann"], embedding=axis(0))
    seen: dict[str, tuple[int, int]] = {}
    barrier = threading.Barrier(3, timeout=5)

    def spy(leg):
        def run_spied(cursor, request):
            cursor.execute("SELECT pg_backend_pid()")
            seen[leg.__name__] = (threading.get_ident(), cursor.fetchone()[0])
            barrier.wait()  # all three are running at the same moment
            return leg(cursor, request)

        return run_spied

    for name, leg in list(legs.LEG_FUNCTIONS.items()):
        monkeypatch.setitem(legs.LEG_FUNCTIONS, name, spy(leg))
    reports = run_legs(
        legs.LEG_FUNCTIONS,
        request_for(alice, "tennis with Ann", query_embedding=tuple(axis(0))),
        deadline=time.monotonic() + 10,
    )
    assert {name: report.status for name, report in reports.items()} == {
        "vector": "ok",
        "text": "ok",
        "entity": "ok",
    }
    assert all(report.count == 1 for report in reports.values())
    assert len({thread for thread, _ in seen.values()}) == 3
    assert len({pid for _, pid in seen.values()}) == 3


@pytest.mark.django_db(transaction=True)
def test_it_drops_a_failed_and_a_timed_out_leg_and_keeps_the_rest(alice, monkeypatch):
    memory = make_memory(alice, "Tennis with Ann.", entities=["Ann"])
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", _explode)
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "vector", _sleep)
    reports = run_legs(
        ["vector", "text", "entity"],
        request_for(alice, "tennis with Ann", timeout=0.3),
        deadline=time.monotonic() + 10,
    )
    assert reports["text"].status == "failed"
    assert reports["vector"].status == "timeout"
    assert reports["entity"].status == "ok"
    assert reports["entity"].ranked_ids == [memory.pk]


@pytest.mark.django_db(transaction=True)
def test_a_leg_on_the_pool_runs_in_autocommit_under_its_timeout(alice, monkeypatch):
    seen: dict[str, tuple] = {}

    def spy(cursor, request):
        # In autocommit each statement is a transaction of its own: it starts
        # when the statement does.
        cursor.execute("SELECT now() = statement_timestamp(), current_setting('statement_timeout')")
        seen["text"] = cursor.fetchone()
        return []

    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", spy)
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "vector", _sleep)
    # The wait outlasts the database's cancel by far: on two busy cores the
    # cancelled leg may take a while to report, and it must be its own report.
    monkeypatch.setattr(legs, "WAIT_GRACE_SECONDS", 60.0)
    reports = run_legs(
        ["text", "vector"],
        request_for(alice, "tennis", timeout=0.4),
        deadline=time.monotonic() + 10,
    )
    assert seen["text"] == (True, "400ms")
    assert reports["text"].status == "ok"
    # The database cancelled the sleep at the leg's timeout, before the wait ended.
    assert reports["vector"].status == "timeout"
    assert reports["vector"].error == "cancelled after 0.4 s"


class _RecordingCursor:
    """A cursor that notes the graph walk's iterative-scan setting as it runs."""

    def __init__(self, cursor):
        self.cursor = cursor
        self.iterative_scan: list[str | None] = []

    def execute(self, sql, params=None):
        if "WITH nearest AS" in sql:
            self.cursor.execute("SELECT current_setting('hnsw.iterative_scan', true)")
            self.iterative_scan.append(self.cursor.fetchone()[0])
        return self.cursor.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self.cursor, name)


@pytest.mark.django_db(transaction=True)
def test_the_graph_walk_keeps_its_settings_on_a_connection_in_autocommit(alice):
    make_memory(alice, "Tennis with Ann.", embedding=axis(0))
    request = request_for(alice, query_embedding=tuple(axis(0)))
    where, params = legs._filters(request)
    params["embedding"] = legs.vector_text(axis(0))
    assert not connection.in_atomic_block
    with connection.cursor() as cursor:
        recording = _RecordingCursor(cursor)
        nearest = legs._approximate_nearest(recording, where, params, len(axis(0)))
        cursor.execute("SELECT current_setting('hnsw.iterative_scan')")
        after = cursor.fetchone()[0]
    assert [memory_id for memory_id, _ in nearest] == [Memory.objects.get(owner=alice).pk]
    assert recording.iterative_scan == ["relaxed_order"]
    # Set for the walk's own transaction, which has ended.
    assert after == "off"


@pytest.mark.django_db(transaction=True)
def test_it_stops_waiting_at_the_deadline(alice, monkeypatch):
    monkeypatch.setitem(legs.LEG_FUNCTIONS, "text", _sleep)
    started = time.monotonic()
    reports = run_legs(["text"], request_for(alice, "x", timeout=5.0), deadline=started + 0.3)
    assert reports["text"].status == "timeout"
    assert reports["text"].error == "no answer in time"


@pytest.mark.django_db
def test_it_restores_settings_on_a_connection_that_has_not_loaded_pgvector():
    # A new connection has no hnsw.* settings until pgvector's library loads
    # (current_setting() gives NULL); restoring those must not set '' on them.
    fresh = connections.create_connection("default")
    try:
        with fresh.cursor() as cursor, fresh.wrap_database_errors:
            cursor.execute("BEGIN")
            with legs.local_settings(cursor, {"hnsw.iterative_scan": "relaxed_order"}):
                cursor.execute("SELECT '[1,2]'::vector <=> '[1,3]'::vector")
            cursor.execute("SHOW hnsw.iterative_scan")
            assert cursor.fetchone()[0] == "relaxed_order"
            cursor.execute("COMMIT")
    finally:
        fresh.close()


@pytest.mark.django_db
def test_it_reuses_an_owners_share_of_the_table_for_a_while(alice, bob, monkeypatch):
    monkeypatch.setattr(legs, "OWNER_SHARE_TTL", 60.0)
    _bulk_memories(alice, 40, lambda i: vector((0, 1.0), (1 + i, 0.1)))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        rows, share = legs._owner_share(cursor, alice.pk)
        assert (rows, share) == (40, 1.0)
        _bulk_memories(bob, 120, lambda i: vector((0, 1.0), (1 + i, 0.1)))
        cursor.execute("ANALYZE memories_memory")
        # Within the minute: the statistics as first read, no statement sent.
        with CaptureQueriesContext(connection) as queries:
            assert legs._owner_share(cursor, alice.pk) == (40, 1.0)
        assert not queries.captured_queries
        clock = time.monotonic() + 61
        monkeypatch.setattr(legs.time, "monotonic", lambda: clock)
        rows, share = legs._owner_share(cursor, alice.pk)
    assert rows == 160 and share == pytest.approx(0.25)
