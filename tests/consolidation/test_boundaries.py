"""The exact instants and the exact similarity at which consolidation's rules turn.

Archive: an episode idle for more than 180 days (exactly 180 is not more).
Decay: a fact unconfirmed for more than 365 days. Merge: cosine 0.95 or more."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories import consolidation
from memories.models import Memory
from tests.base import make_memory
from tests.consolidation.helpers import DIMENSIONS, at_cosine, axis

ONE_MICROSECOND = timedelta(microseconds=1)  # the resolution of a PostgreSQL timestamp


@pytest.fixture(autouse=True)
def no_llm(settings):
    settings.LLM_BASE_URL = ""


@pytest.fixture
def now():
    return timezone.now()


@pytest.mark.parametrize(
    ("idle", "archived"),
    [
        (timedelta(days=180), False),
        (timedelta(days=180) + ONE_MICROSECOND, True),
    ],
    ids=["idle exactly 180 days", "idle 180 days and 1 µs"],
)
@pytest.mark.parametrize("idle_since", ["created_at", "last_retrieved_at"])
def test_it_archives_an_episode_only_once_idle_for_more_than_180_days(
    alice, now, idle, archived, idle_since
):
    times = {"created_at": now - idle - timedelta(days=1000), "last_retrieved_at": now - idle}
    if idle_since == "created_at":
        times = {"created_at": now - idle}
    memory = make_memory(alice, "Alice went to Rome.", Memory.Type.EPISODIC, **times)

    _, outcome = consolidation.consolidate(now=now)

    memory.refresh_from_db()
    assert (memory.status == Memory.Status.ARCHIVED) is archived
    assert outcome.archived == int(archived)


@pytest.mark.parametrize(
    ("unconfirmed", "decayed"),
    [
        (timedelta(days=365), False),
        (timedelta(days=365) + ONE_MICROSECOND, True),
    ],
    ids=["unconfirmed exactly 365 days", "unconfirmed 365 days and 1 µs"],
)
def test_it_decays_a_fact_only_once_unconfirmed_for_more_than_365_days(
    alice, now, unconfirmed, decayed
):
    memory = make_memory(
        alice,
        "Alice works at Acme.",
        confidence=0.9,
        created_at=now - unconfirmed - timedelta(days=100),
        last_confirmed_at=now - unconfirmed,
    )

    consolidation.consolidate(now=now)

    memory.refresh_from_db()
    assert memory.confidence == (pytest.approx(0.72) if decayed else 0.9)


def exactly_at_095() -> list[float]:
    # (19, 5, 3, 2, 1) has length 20 and cosine 19/20 to the first axis; small integers
    # are exact in the stored single-precision vector, so the database's cosine is 0.95
    # itself, not the nearest float to it.
    vector = [0.0] * DIMENSIONS
    vector[:5] = [19.0, 5.0, 3.0, 2.0, 1.0]
    return vector


@pytest.mark.parametrize(
    ("twin", "merged"),
    [(exactly_at_095(), True), (at_cosine(0, 1, 0.9499), False)],
    ids=["cosine 0.95", "cosine 0.9499"],
)
def test_it_merges_a_pair_at_a_cosine_of_095_or_more(alice, now, twin, merged):
    first = make_memory(alice, "Alice likes green tea.", embedding=axis(0))
    second = make_memory(alice, "Alice enjoys green tea.", embedding=twin)

    _, outcome = consolidation.consolidate(now=now)

    first.refresh_from_db()
    second.refresh_from_db()
    assert outcome.merged_groups == int(merged)
    expected = Memory.Status.SUPERSEDED if merged else Memory.Status.ACTIVE
    assert (first.status, second.status) == (expected, expected)
