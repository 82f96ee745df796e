from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from memories import consolidation
from memories.consolidation import group_pairs, near_duplicate_pairs
from memories.models import Memory
from tests.base import make_memory
from tests.consolidation.helpers import at_cosine, axis

# Directions no other test file plants: the shared graph keeps the entries of
# every rolled-back test (until a VACUUM), and many identical vectors (dozens
# of tests write axis(0)) can leave a short walk among other owners' copies.
BASE = 200


@pytest.fixture(scope="module", autouse=True)
def graph_without_dead_entries(django_db_setup, django_db_blocker):
    """Earlier runs of these tests leave their rolled-back rows in the graph at
    these same directions, run after run on a kept test database; a VACUUM
    (outside any transaction) takes them out before the walks below."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("VACUUM memories_memory")


def test_it_groups_pairs_with_union_find():
    pairs = [(5, 9), (9, 2), (7, 8), (2, 5), (11, 12), (12, 13), (8, 7)]
    assert group_pairs(pairs) == [[2, 5, 9], [7, 8], [11, 12, 13]]


def test_it_groups_nothing_without_pairs():
    assert group_pairs([]) == []


def test_it_pairs_memories_at_or_above_the_threshold(alice):
    base = make_memory(alice, "Alice likes tea.", embedding=axis(BASE + 0))
    close = make_memory(alice, "Alice enjoys tea.", embedding=at_cosine(BASE + 0, BASE + 1, 0.951))
    far = make_memory(alice, "Alice likes coffee.", embedding=at_cosine(BASE + 0, BASE + 2, 0.94))
    pairs = set(near_duplicate_pairs(alice.pk))
    assert pairs == {(base.pk, close.pk), (close.pk, base.pk)}
    assert far.pk not in {a for a, _ in pairs} | {b for _, b in pairs}


def test_it_pairs_only_active_memories_of_the_same_owner(alice, bob):
    mine = make_memory(alice, "Alice likes tea.", embedding=axis(BASE + 0))
    make_memory(bob, "Bob likes tea.", embedding=axis(BASE + 0))
    make_memory(alice, "Alice likes tea!", embedding=axis(BASE + 0), status=Memory.Status.ARCHIVED)
    make_memory(alice, "Alice likes tea?", embedding=axis(BASE + 0), status=Memory.Status.PROPOSED)
    make_memory(alice, "Alice likes tea (no vector).")
    assert near_duplicate_pairs(alice.pk) == []
    assert near_duplicate_pairs(bob.pk) == []
    twin = make_memory(alice, "Alice really likes tea.", embedding=axis(BASE + 0))
    assert sorted(near_duplicate_pairs(alice.pk)) == [(mine.pk, twin.pk), (twin.pk, mine.pk)]


def test_it_joins_a_group_larger_than_the_neighbour_count(alice):
    members = [
        make_memory(
            alice, f"Alice likes tea, version {i}.", embedding=at_cosine(BASE, BASE + 1 + i, 0.99)
        )
        for i in range(15)
    ]
    [group] = group_pairs(near_duplicate_pairs(alice.pk, neighbours=3))
    assert group == sorted(m.pk for m in members)


def test_it_reports_probes_that_did_not_find_themselves(alice):
    tea = make_memory(alice, "Alice likes tea.", embedding=axis(BASE + 0))
    twin = make_memory(alice, "Alice enjoys tea.", embedding=axis(BASE + 0))
    found, lost = consolidation._neighbour_pairs(
        [tea.pk, twin.pk], 5, 0.05, 20, settings.EMBEDDING_DIMENSIONS
    )
    assert sorted(found) == [(tea.pk, twin.pk), (twin.pk, tea.pk)]
    assert lost == []


def test_it_retries_lost_probes_and_falls_back_to_exact_comparison(alice, monkeypatch):
    base = make_memory(alice, "Alice likes tea.", embedding=axis(BASE + 0))
    close = make_memory(alice, "Alice enjoys tea.", embedding=at_cosine(BASE + 0, BASE + 1, 0.97))
    coffee = make_memory(alice, "Alice likes coffee.", embedding=at_cosine(BASE + 0, BASE + 2, 0.9))
    other = make_memory(alice, "Alice hates tea.", embedding=axis(BASE + 3))
    search = consolidation._neighbour_pairs
    widths = []

    def lost_in_the_graph(batch, neighbours, max_distance, ef_search, dimensions):
        widths.append((ef_search, sorted(batch)))
        search(batch, neighbours, max_distance, ef_search, dimensions)
        return [], list(batch)  # as if no probe had arrived

    monkeypatch.setattr(consolidation, "_neighbour_pairs", lost_in_the_graph)
    stats = consolidation.SearchStats()
    pairs = consolidation.near_duplicate_pairs(alice.pk, stats=stats)
    everyone = sorted([base.pk, close.pk, coffee.pk, other.pk])
    assert widths == [
        (consolidation.HNSW_EF_SEARCH, everyone),
        (consolidation.HNSW_EF_SEARCH_RETRY, everyone),
    ]
    assert sorted(pairs) == [(base.pk, close.pk), (close.pk, base.pk)]
    assert (stats.probed, stats.retried, stats.compared_exactly) == (4, 4, 4)
