"""A question about now, answered by the memory that replaced the one it matched.

Through ``recall()`` on PostgreSQL: the later memory is read from the store by
subject and aspect (retrieval.candidates.load_successors), not found by a leg.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.about import about_fields, derive_about
from retrieval import recall as recall_module
from retrieval.recall import recall
from tests.base import make_memory
from tests.retrieval.helpers import ABOUT_MANAGER, axis, manager_history, vector


@pytest.fixture(autouse=True)
def generous_leg_timeout(settings):
    """A busy machine must not time a leg or the lookup out: only the test of a
    late lookup sets a budget, and the statement it sends outlasts it tenfold."""
    settings.LEG_TIMEOUT = 60.0


def ask(owner, query: str, **options):
    """Recall by the text leg alone: it finds the older memory ("manager"), never
    the later one, which can only join as what replaced it."""
    return recall(
        owner, query, query_embedding=axis(0), legs=["text"], explain=True, dry_run=True, **options
    )


@pytest.mark.django_db
def test_the_memory_that_replaced_the_match_answers_a_question_about_now(alice):
    older, later = manager_history(alice)
    result = ask(alice, "Who is my manager now?")
    assert result.memories[0].memory.pk == later.pk
    parts = result.memories[0].parts
    assert parts["successor_of"] == older.pk
    assert parts["successor_likeness"] == pytest.approx(0.5, abs=1e-3)
    assert parts["ranks"] == {}


@pytest.mark.django_db
def test_a_question_about_the_past_keeps_the_memory_it_matched(alice):
    older, later = manager_history(alice)
    result = ask(alice, "Who was my manager at Fernwood?")
    assert result.memories[0].memory.pk == older.pk
    assert later.pk not in {item.memory.pk for item in [*result.memories, *result.cut]}


@pytest.mark.django_db
def test_a_replay_of_the_past_knows_nothing_written_after_it(alice):
    older, later = manager_history(alice, later_days_ago=30)
    result = ask(alice, "Who is my manager now?", as_of=timezone.now() - timedelta(days=60))
    assert result.memories[0].memory.pk == older.pk
    assert later.pk not in {item.memory.pk for item in [*result.memories, *result.cut]}


@pytest.mark.django_db
def test_another_owners_later_memory_never_joins(alice, bob):
    older = make_memory(
        alice,
        "Her manager at Fernwood is Hannah Ostrowski, the Head of Design.",
        created_at=timezone.now() - timedelta(days=700),
        embedding=axis(0),
        **ABOUT_MANAGER,
    )
    bobs = make_memory(
        bob,
        "At Loomwork he reports to Tobi Mensah, the VP of Design.",
        created_at=timezone.now() - timedelta(days=30),
        embedding=vector((0, 0.9), (7, 0.436)),
        **ABOUT_MANAGER,
    )
    result = ask(alice, "Who is my manager now?")
    found = {item.memory.pk for item in [*result.memories, *result.cut]}
    assert older.pk in found
    assert bobs.pk not in found


@pytest.mark.django_db
def test_a_later_memory_no_longer_active_never_joins(alice):
    older, later = manager_history(alice)
    later.status = "archived"
    later.save(update_fields=["status"])
    result = ask(alice, "Who is my manager now?")
    assert result.memories[0].memory.pk == older.pk
    assert later.pk not in {item.memory.pk for item in [*result.memories, *result.cut]}


def _slow_lookup(owner_id, olders, as_of, *, replaying=False):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(5)")
    return {}, {}


@pytest.mark.django_db
def test_a_lookup_that_runs_late_leaves_the_later_memory_out_not_the_answer(
    alice, settings, monkeypatch, caplog
):
    older, later = manager_history(alice)
    settings.LEG_TIMEOUT = 0.5
    monkeypatch.setattr(recall_module, "load_successors", _slow_lookup)
    result = ask(alice, "Who is my manager now?")
    assert result.memories[0].memory.pk == older.pk
    assert later.pk not in {item.memory.pk for item in [*result.memories, *result.cut]}
    assert "recall step successors timeout" in caplog.text


@pytest.mark.django_db
def test_a_grandchilds_birth_answers_how_many_grandchildren_now(alice):
    # The birth names neither the count nor the word the question asks with:
    # it joins because it is about the owner's grandchildren (before: about
    # "Matthew" and a birthday, so the two-year-old count answered "now").
    now = timezone.now()

    def written(content, memory_type, days_ago, embedding):
        about = derive_about(content, memory_type, written=now - timedelta(days=days_ago))
        return make_memory(
            alice,
            content,
            memory_type,
            created_at=now - timedelta(days=days_ago),
            embedding=embedding,
            **about_fields(about),
        )

    count = written(
        "Has two grandchildren, Claire's kids Ruby (8) and Finn (5).", "semantic", 700, axis(0)
    )
    birth = written(
        "Matthew and Jess's son Theo was born on 9 December, making her a grandmother "
        "for the third time.",
        "episodic",
        30,
        vector((0, 0.6), (9, 0.8)),
    )
    for index in range(3):
        written(f"Waters the garden on day {index} of the week.", "semantic", 300, axis(20 + index))

    result = ask(alice, "How many grandchildren do I have now?")

    assert result.memories[0].memory.pk == birth.pk
    assert result.memories[0].parts["successor_of"] == count.pk
