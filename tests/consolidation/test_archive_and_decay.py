from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from memories import consolidation
from memories.models import Memory, MemoryEvent
from tests.base import make_memory
from tests.consolidation.helpers import axis


def days_ago(days: float):
    return timezone.now() - timedelta(days=days)


@pytest.fixture(autouse=True)
def no_llm(settings):
    settings.LLM_BASE_URL = ""


@pytest.mark.parametrize("days, archived", [(179, False), (181, True)])
def test_it_archives_episodes_never_retrieved_since_creation(alice, days, archived):
    memory = make_memory(
        alice, "Alice went to Rome.", Memory.Type.EPISODIC, created_at=days_ago(days)
    )
    consolidation.consolidate()
    memory.refresh_from_db()
    assert (memory.status == Memory.Status.ARCHIVED) is archived
    if archived:
        [event] = memory.events.all()
        assert (event.action, event.via, event.reason) == (
            "archived",
            "consolidation",
            "consolidation",
        )


@pytest.mark.parametrize("days, archived", [(179, False), (181, True)])
def test_it_counts_idleness_from_the_last_retrieval(alice, days, archived):
    memory = make_memory(
        alice,
        "Alice went to Rome.",
        Memory.Type.EPISODIC,
        created_at=days_ago(900),
        last_retrieved_at=days_ago(days),
    )
    consolidation.consolidate()
    memory.refresh_from_db()
    assert (memory.status == Memory.Status.ARCHIVED) is archived


def test_it_archives_only_episodes(alice):
    others = [
        make_memory(alice, f"Old {kind} memory.", kind, created_at=days_ago(1000))
        for kind in (Memory.Type.PREFERENCE, Memory.Type.REFLECTION)
    ]
    consolidation.consolidate()
    assert all(Memory.objects.get(pk=m.pk).status == Memory.Status.ACTIVE for m in others)


@pytest.mark.parametrize("days, decayed", [(364, False), (366, True)])
def test_it_decays_facts_unconfirmed_for_over_a_year(alice, days, decayed):
    memory = make_memory(
        alice,
        "Alice works at Acme.",
        confidence=0.9,
        created_at=days_ago(800),
        last_confirmed_at=days_ago(days),
    )
    consolidation.consolidate()
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    if decayed:
        assert memory.confidence == pytest.approx(0.9 * consolidation.DECAY_FACTOR)
        [event] = memory.events.all()
        assert (event.action, event.via, event.reason) == (
            "decayed",
            "consolidation",
            "consolidation",
        )
        assert event.data == {"from_confidence": 0.9, "to_confidence": pytest.approx(0.72)}
    else:
        assert memory.confidence == 0.9
        assert not memory.events.exists()


def test_it_decays_a_never_confirmed_fact_from_its_creation(alice):
    memory = make_memory(alice, "Alice works at Acme.", confidence=0.5, created_at=days_ago(366))
    Memory.objects.filter(pk=memory.pk).update(last_confirmed_at=None)
    consolidation.consolidate()
    assert Memory.objects.get(pk=memory.pk).confidence == pytest.approx(0.4)


def test_it_never_decays_below_the_floor(alice):
    near_floor = make_memory(alice, "Fact A.", confidence=0.11, created_at=days_ago(400))
    at_floor = make_memory(
        alice, "Fact B.", confidence=consolidation.DECAY_FLOOR, created_at=days_ago(400)
    )
    consolidation.consolidate()
    assert Memory.objects.get(pk=near_floor.pk).confidence == consolidation.DECAY_FLOOR
    assert Memory.objects.get(pk=at_floor.pk).confidence == consolidation.DECAY_FLOOR
    assert not at_floor.events.exists()


def test_it_decays_only_facts(alice):
    preference = make_memory(
        alice,
        "Alice likes jazz.",
        Memory.Type.PREFERENCE,
        confidence=0.9,
        created_at=days_ago(1000),
    )
    consolidation.consolidate()
    assert Memory.objects.get(pk=preference.pk).confidence == 0.9


def test_it_decays_again_only_after_another_year(alice):
    memory = make_memory(alice, "Alice works at Acme.", confidence=1.0, created_at=days_ago(400))
    consolidation.consolidate()
    with time_machine.travel(timezone.now() + timedelta(days=364)):
        consolidation.consolidate()
        assert Memory.objects.get(pk=memory.pk).confidence == pytest.approx(0.8)
    with time_machine.travel(timezone.now() + timedelta(days=366)):
        consolidation.consolidate()
        assert Memory.objects.get(pk=memory.pk).confidence == pytest.approx(0.64)


def test_it_changes_nothing_on_a_second_run(alice, bob):
    make_memory(alice, "Tea.", embedding=axis(0), created_at=days_ago(500))
    make_memory(alice, "Tea!", embedding=axis(0), created_at=days_ago(450))
    make_memory(alice, "Rome trip.", Memory.Type.EPISODIC, created_at=days_ago(200))
    make_memory(bob, "Bob works at Acme.", created_at=days_ago(400))
    make_memory(bob, "Bob's recent fact.", embedding=axis(5))
    first_plan, first = consolidation.consolidate()
    assert (first.merged_groups, first.archived) == (1, 1)
    # Bob's fact, and the canonical row of Alice's stale pair, both decay once.
    assert first.decayed == 2
    events = MemoryEvent.objects.count()
    snapshot = list(Memory.objects.order_by("pk").values_list("pk", "status", "confidence"))
    second_plan, second = consolidation.consolidate()
    assert second_plan.is_empty
    assert second.summary() == "merged 0 groups (0 memories), archived 0, decayed 0"
    assert MemoryEvent.objects.count() == events
    assert list(Memory.objects.order_by("pk").values_list("pk", "status", "confidence")) == snapshot


def test_it_plans_without_writing(alice):
    make_memory(alice, "Tea.", embedding=axis(0))
    make_memory(alice, "Tea!", embedding=axis(0))
    make_memory(alice, "Rome trip.", Memory.Type.EPISODIC, created_at=days_ago(200))
    make_memory(alice, "Alice works at Acme.", created_at=days_ago(400))
    snapshot = list(Memory.objects.order_by("pk").values_list("pk", "status", "confidence"))
    plan, outcome = consolidation.consolidate(dry_run=True)
    assert outcome is None
    assert (len(plan.merges), len(plan.archives), len(plan.decays)) == (1, 1, 1)
    assert list(Memory.objects.order_by("pk").values_list("pk", "status", "confidence")) == snapshot
    assert not MemoryEvent.objects.exists()
