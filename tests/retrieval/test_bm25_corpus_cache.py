from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from retrieval import bm25
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def statistics(owner, as_of):
    with connection.cursor() as cursor:
        return bm25.corpus_statistics(cursor, owner.pk, as_of)


def test_now_reads_the_counters_exact_after_every_write(alice, monkeypatch):
    monkeypatch.setattr(bm25, "BM25_CORPUS_STATS_TTL", 60)
    make_memory(alice, "Alice keeps bees in the garden.")
    assert statistics(alice, timezone.now())[0] == 1
    make_memory(alice, "Alice sings in a choir on Thursdays.")
    assert statistics(alice, timezone.now())[0] == 2


def test_the_counters_give_what_counting_the_memories_gives(alice, bob):
    now = timezone.now()
    make_memory(alice, "Alice keeps bees in the garden behind the house.")
    make_memory(alice, "Alice sings.", created_at=now - timedelta(days=3))
    make_memory(bob, "Bob repairs old bicycles on weekends.")
    counted = statistics(alice, now + timedelta(minutes=5))  # beyond "now": counted
    assert statistics(alice, now) == pytest.approx(counted)
    assert counted[0] == 2


def test_a_replay_reuses_the_statistics_of_its_moment(alice, monkeypatch):
    monkeypatch.setattr(bm25, "BM25_CORPUS_STATS_TTL", 60)
    past = timezone.now() - timedelta(days=1)
    make_memory(alice, "An old memory.", created_at=past - timedelta(days=1))
    assert statistics(alice, past)[0] == 1
    make_memory(alice, "Another old memory.", created_at=past - timedelta(days=2))
    # Within the TTL the same replayed moment reuses N.
    assert statistics(alice, past)[0] == 1
    monkeypatch.setattr(bm25, "BM25_CORPUS_STATS_TTL", 0)
    assert statistics(alice, past)[0] == 2


def test_it_keys_replays_on_their_own_moment(alice, monkeypatch):
    monkeypatch.setattr(bm25, "BM25_CORPUS_STATS_TTL", 60)
    now = timezone.now()
    make_memory(alice, "An old memory.", created_at=now - timedelta(days=30))
    make_memory(alice, "A new memory.", created_at=now)
    assert statistics(alice, now)[0] == 2
    assert statistics(alice, now - timedelta(days=10))[0] == 1


def test_it_never_keeps_an_empty_corpus(alice, bob, monkeypatch):
    monkeypatch.setattr(bm25, "BM25_CORPUS_STATS_TTL", 60)
    assert statistics(alice, timezone.now()) == (0, 0)
    make_memory(alice, "Alice's first memory counts at once.")
    assert statistics(alice, timezone.now())[0] == 1
    # Owners never share statistics.
    assert statistics(bob, timezone.now())[0] == 0
