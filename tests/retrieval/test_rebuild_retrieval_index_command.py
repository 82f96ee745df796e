"""``manage.py rebuild_retrieval_index``: everyone's part, one owner's, or a check."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from memories.models import Memory
from retrieval import index
from retrieval.models import Posting

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("rebuild_retrieval_index", *args, "--no-progress", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def wipe_postings() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM retrieval_posting")


def postings_of(owner) -> int:
    return Posting.objects.filter(owner_id=owner.pk).count()


@pytest.fixture
def written(alice, bob):
    Memory.remember(alice, "Ann drinks tea in Lisbon", "semantic", entities=["Ann"])
    Memory.remember(bob, "Bob likes Oslo in winter", "preference", entities=["Oslo"])
    return {owner: postings_of(owner) for owner in (alice, bob)}


def test_it_refuses_an_unknown_owner(written):
    wipe_postings()
    with pytest.raises(CommandError, match="There is no user 'nobody'"):
        run("--owner", "nobody")
    assert Posting.objects.count() == 0


def test_it_rebuilds_one_owners_part(written, alice, bob):
    wipe_postings()
    out, err = run("--owner", "alice")
    assert "Rebuilt alice's part of the retrieval index: postings " in out
    assert postings_of(alice) == written[alice] > 0
    assert postings_of(bob) == 0
    # Bob's memories are in the check's sample: it says his postings are stale.
    assert "retrieval.W002" in err and "rebuild_retrieval_index" in err


def test_it_rebuilds_everyones_part_and_checks_it(written, alice, bob):
    wipe_postings()
    out, err = run()
    assert "Rebuilt the retrieval index: postings " in out
    assert "The retrieval index is complete and matches the memories." in out
    assert err == ""
    assert {owner: postings_of(owner) for owner in (alice, bob)} == written


def test_it_resumes_an_index_a_bulk_load_left_paused(written, alice):
    index.pause()
    loaded = Memory.remember(alice, "Ann visits Porto", "episodic", entities=["Porto"])
    out, _ = run()
    assert "Switching 6 paused trigger(s) back on." in out
    assert "vector index" in out
    assert index.paused_triggers() == []
    assert Posting.objects.filter(memory_id=loaded.pk, term="porto").exists()


def test_it_refuses_one_owner_while_the_triggers_are_paused(written):
    index.pause(vectors=False)
    with pytest.raises(CommandError, match="without --owner"):
        run("--owner", "alice")


def test_it_checks_only_and_fails_on_a_missing_part(written):
    wipe_postings()
    out, err = run("--check-only")
    assert "retrieval.W002" in err
    assert Posting.objects.count() == 0
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("DROP TRIGGER memory_counts_owner_entities ON memories_memory")
    with pytest.raises(CommandError, match="1 problem"):
        run("--check-only")
