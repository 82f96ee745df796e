"""Large runs search and merge on several connections at once; the result is the same."""

from __future__ import annotations

import threading

import pytest

from memories import consolidation
from memories.models import Memory
from tests.base import make_memory
from tests.consolidation.helpers import at_cosine, axis


@pytest.mark.django_db(transaction=True)
def test_it_finds_and_merges_the_same_groups_on_several_connections(
    django_user_model, settings, monkeypatch
):
    settings.LLM_BASE_URL = ""
    monkeypatch.setattr(consolidation, "SCAN_BATCH", 3)
    monkeypatch.setattr(consolidation, "MERGE_BATCH", 1)
    threads = set()
    search = consolidation._neighbour_pairs

    def recording_search(*args):
        threads.add(threading.get_ident())
        return search(*args)

    monkeypatch.setattr(consolidation, "_neighbour_pairs", recording_search)
    owner = django_user_model.objects.create_user("carol", password="carol-password-1")
    groups = []
    for topic in range(4):
        groups.append(
            [
                make_memory(
                    owner, f"Topic {topic}, wording {n}.", embedding=at_cosine(topic, 100 + n, 0.98)
                ).pk
                for n in range(2 + topic % 2)
            ]
        )
    loners = [make_memory(owner, f"Loner {n}.", embedding=axis(50 + n)).pk for n in range(5)]
    plan = consolidation.plan(owner)
    assert sorted(group.ids for group in plan.merges) == groups
    assert threads and threading.get_ident() not in threads
    outcome = consolidation.apply(plan)
    assert (outcome.merged_groups, outcome.superseded, outcome.skipped) == (4, 10, 0)
    for ids in groups:
        heads = set(Memory.objects.filter(pk__in=ids).values_list("superseded_by", flat=True))
        assert len(heads) == 1 and None not in heads
    assert Memory.objects.filter(pk__in=loners, status=Memory.Status.ACTIVE).count() == 5
    assert consolidation.plan(owner).is_empty
