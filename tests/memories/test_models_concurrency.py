"""Concurrent state changes: row locks let exactly one writer win."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memories.models import IllegalTransition, Memory, MemoryEvent
from tests.base import make_memory

WRITERS = 20


def run_at_once(count: int, work) -> list[object]:
    """Run ``work(i)`` in ``count`` threads released together; return results or errors."""
    barrier = threading.Barrier(count)
    outcomes: list[object] = [None] * count

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            outcomes[index] = work(index)
        except Exception as error:  # the outcome under test
            outcomes[index] = error
        finally:
            # Each thread has its own connection; close it so the test database can go.
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_it_lets_exactly_one_of_twenty_concurrent_supersedes_win(alice):
    original = make_memory(alice, "Alice lives in Lyon.")

    def supersede(index: int) -> Memory:
        return Memory.objects.get(pk=original.pk).supersede(f"Alice lives in city {index}.")

    outcomes = run_at_once(WRITERS, supersede)

    winners = [o for o in outcomes if isinstance(o, Memory)]
    losers = [o for o in outcomes if isinstance(o, IllegalTransition)]
    assert len(winners) == 1
    assert len(losers) == WRITERS - 1
    [winner] = winners
    for error in losers:
        assert error.status == Memory.Status.SUPERSEDED
        assert error.head_id == winner.pk
    chain = Memory.objects.chain(original)
    assert [m.pk for m in chain] == [original.pk, winner.pk]
    assert [m.pk for m in chain if m.superseded_by_id is None] == [winner.pk]
    assert Memory.objects.for_owner(alice).count() == 2
    assert Memory.objects.for_owner(alice).active().get() == winner
    assert MemoryEvent.objects.filter(action=MemoryEvent.Action.SUPERSEDED).count() == 1


@pytest.mark.django_db(transaction=True)
def test_it_lets_exactly_one_of_concurrent_confirm_and_reject_win(alice):
    proposal = Memory.propose(alice, "Alice is vegetarian.", Memory.Type.PREFERENCE)

    def decide(index: int) -> Memory:
        memory = Memory.objects.get(pk=proposal.pk)
        return memory.confirm() if index % 2 else memory.reject()

    outcomes = run_at_once(WRITERS, decide)

    assert sum(isinstance(o, Memory) for o in outcomes) == 1
    assert sum(isinstance(o, IllegalTransition) for o in outcomes) == WRITERS - 1
    decisions = MemoryEvent.objects.filter(memory=proposal).exclude(
        action=MemoryEvent.Action.PROPOSED
    )
    assert decisions.count() == 1
