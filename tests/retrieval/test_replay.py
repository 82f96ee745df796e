"""Replays of the past: each version during its own lifetime, and nothing stamped."""

from datetime import timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from memories import redaction
from memories.models import Memory
from retrieval.legs import LegRequest, entity_leg, text_leg
from retrieval.models import RetrievalStamp
from retrieval.recall import recall
from retrieval.replay import needs_replay
from tests.base import make_memory

pytestmark = pytest.mark.django_db

QUERY = "Where does Ana live?"


@pytest.fixture
def history(alice):
    """A chain edited twice, and a proposal confirmed long after it was made.

    day 0   v1 "Ana lives in Lisbon." remembered
    day 1   proposal "Ana has a dog called Rex." made
    day 10  v2 "Ana lives in Porto." supersedes v1
    day 20  v3 "Ana lives in Braga." supersedes v2
    day 30  the proposal is confirmed
    """
    start = timezone.now() - timedelta(days=100)
    at = {day: start + timedelta(days=day) for day in (0, 1, 10, 20, 30)}
    with time_machine.travel(at[0], tick=False):
        v1 = Memory.remember(alice, "Ana lives in Lisbon.", Memory.Type.SEMANTIC)
    with time_machine.travel(at[1], tick=False):
        dog = Memory.propose(alice, "Ana has a dog called Rex.", Memory.Type.SEMANTIC)
    with time_machine.travel(at[10], tick=False):
        v2 = v1.supersede("Ana lives in Porto.")
    with time_machine.travel(at[20], tick=False):
        v3 = v2.supersede("Ana lives in Braga.")
    with time_machine.travel(at[30], tick=False):
        dog.confirm()
    return {"at": at, "v1": v1, "v2": v2, "v3": v3, "dog": dog}


def seen(owner, as_of) -> set[str]:
    result = recall(owner, QUERY, as_of=as_of, explain=True, dry_run=True)
    return {item.memory.content for item in [*result.memories, *result.cut]}


def test_it_sees_each_version_during_its_own_lifetime(alice, history):
    at = history["at"]
    hour = timedelta(hours=1)
    assert seen(alice, at[0] + hour) == {"Ana lives in Lisbon."}
    assert seen(alice, at[10] + hour) == {"Ana lives in Porto."}
    # The proposal existed since day 1 but was not confirmed until day 30.
    assert seen(alice, at[20] + hour) == {"Ana lives in Braga."}
    assert seen(alice, at[30] + hour) == {"Ana lives in Braga.", "Ana has a dog called Rex."}
    assert seen(alice, timezone.now()) == {"Ana lives in Braga.", "Ana has a dog called Rex."}
    # Before anything was written, nothing.
    assert seen(alice, at[0] - hour) == set()


def test_it_records_each_lifetime(history):
    at = history["at"]
    rows = {key: Memory.objects.get(pk=history[key].pk) for key in ("v1", "v2", "v3", "dog")}
    assert (rows["v1"].active_since, rows["v1"].active_until) == (at[0], at[10])
    assert (rows["v2"].active_since, rows["v2"].active_until) == (at[10], at[20])
    assert (rows["v3"].active_since, rows["v3"].active_until) == (at[20], None)
    assert (rows["dog"].active_since, rows["dog"].active_until) == (at[30], None)


def test_it_replays_only_when_the_past_differs_from_today(alice, history):
    at = history["at"]
    assert needs_replay(alice.pk, at[10] + timedelta(hours=1))
    assert needs_replay(alice.pk, at[20] + timedelta(hours=1))  # the proposal, not yet
    assert not needs_replay(alice.pk, at[30] + timedelta(hours=1))
    assert not needs_replay(alice.pk, timezone.now())


def test_it_replays_the_freshness_pipeline_too(alice, history):
    at = history["at"]
    result = recall(alice, QUERY, pipeline="freshness", as_of=at[10] + timedelta(hours=1))
    assert [item.memory.content for item in result.memories] == ["Ana lives in Porto."]


def test_a_replay_stamps_nothing(alice, history):
    at = history["at"]
    recall(alice, QUERY, as_of=at[10] + timedelta(hours=1))
    assert not RetrievalStamp.objects.filter(owner=alice).exists()
    recall(alice, QUERY)
    stamped = Memory.objects.filter(owner=alice, retrieval_stamp__isnull=False)
    assert {memory.content for memory in stamped} >= {"Ana lives in Braga."}


def test_the_recall_command_replays_the_past(alice, history, capsys):
    as_of = (history["at"][10] + timedelta(hours=1)).isoformat()
    call_command("recall", QUERY, owner=alice.username, as_of=as_of, dry_run=True)
    block = capsys.readouterr().out
    assert "Ana lives in Porto." in block and "Braga" not in block


@pytest.mark.parametrize("query", ["Ana Lisbon Porto", "Ben and Ana", "garden"])
def test_the_row_legs_rank_as_the_postings_do(alice, bob, query):
    for n in range(40):
        make_memory(
            alice,
            f"Note {n}: Ana and the garden in Lisbon, Porto or Ben's {n % 7} places.",
            entities=["Ana", "Ben"][: 1 + n % 2] + (["Lisbon"] if n % 3 else []),
            created_at=timezone.now() - timedelta(days=n),
        )
        make_memory(bob, f"Ana garden {n}", entities=["Ana"])
    as_of = timezone.now() - timedelta(days=5, hours=1)
    for leg in (text_leg, entity_leg):
        ranked = {}
        for replaying in (False, True):
            request = LegRequest(owner_id=alice.pk, query=query, as_of=as_of, replay=replaying)
            with connection.cursor() as cursor:
                ranked[replaying] = leg(cursor, request)
        assert [memory_id for memory_id, _ in ranked[True]] == [m for m, _ in ranked[False]]
        if leg is text_leg:
            assert [score for _, score in ranked[True]] == pytest.approx(
                [score for _, score in ranked[False]]
            )
        # (The entity leg's scores weigh each name by how many memories name it:
        # today's dictionary on the postings, the memories alive then on the rows.)


def test_a_replay_never_shows_a_redacted_version(alice, history):
    at = history["at"]
    history["v2"].refresh_from_db()
    redaction.redact(history["v2"], reason="asked to forget this address")
    assert seen(alice, at[10] + timedelta(hours=1)) == set()
    assert seen(alice, at[20] + timedelta(hours=1)) == {"Ana lives in Braga."}
