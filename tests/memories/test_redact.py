"""Memory.redact: the text of a version, or of its whole chain, erased for good."""

from __future__ import annotations

import pytest
from django.db import connection

from memories import redaction
from memories.models import (
    REDACTED_CONTENT,
    IllegalTransition,
    Memory,
    MemoryEvent,
    RedactionRefused,
)
from retrieval import index
from retrieval.models import OwnerEntity, Posting
from retrieval.recall import recall
from tests.base import make_memory

pytestmark = pytest.mark.django_db

Status = Memory.Status


def vector(seed: float) -> list[float]:
    from django.conf import settings

    return [seed] + [0.0] * (settings.EMBEDDING_DIMENSIONS - 1)


@pytest.fixture
def chain(alice):
    """Lockers: "code 4411" (superseded) → "code 9902" (head), with entities and reasons."""
    first = Memory.remember(
        alice, "Gym locker code is 4411.", Memory.Type.SEMANTIC, entities=["Gym"], actor=alice
    )
    second = first.supersede(
        "Gym locker code is 9902.", actor=alice, reason="changed from 4411 to 9902"
    )
    first.refresh_from_db()
    return first, second


def test_it_redacts_one_version_and_keeps_its_place_in_the_chain(alice, chain):
    first, second = chain

    result = redaction.redact(first, reason="a secret", actor=alice, via="api")

    first.refresh_from_db()
    assert result.memory_ids == [first.pk]
    assert first.status == Status.REDACTED
    assert first.content == REDACTED_CONTENT
    assert first.entity_refs == [] and first.embedding is None
    assert first.superseded_by_id == second.pk
    assert [m.pk for m in Memory.objects.chain(second)] == [first.pk, second.pk]
    second.refresh_from_db()
    assert second.status == Status.ACTIVE and second.content == "Gym locker code is 9902."


def test_it_records_who_when_and_why_without_the_text(alice, chain):
    first, _ = chain

    redaction.redact(first, reason="a secret", actor=alice, via="page")

    event = MemoryEvent.objects.get(memory=first, action=MemoryEvent.Action.REDACTED)
    assert (event.actor, event.via, event.reason) == (alice, "page", "a secret")
    assert event.data == {"from": "superseded", "chain": False}


def test_it_redacts_every_version_of_the_chain(alice, chain):
    first, second = chain

    result = redaction.redact(second, chain=True, reason="a secret", actor=alice)

    assert sorted(result.memory_ids) == [first.pk, second.pk]
    assert set(Memory.objects.filter(owner=alice).values_list("status", "content")) == {
        (Status.REDACTED, REDACTED_CONTENT)
    }
    # The head is the head still, and says so; nothing of the chain is active.
    assert Memory.objects.for_owner(alice).active().count() == 0
    assert Memory.head_id_of(first.pk) == second.pk


def test_it_erases_the_reasons_of_the_versions_events_and_their_other_side(alice, chain):
    first, second = chain

    redaction.redact(first, reason="a secret", actor=alice)

    superseded = MemoryEvent.objects.get(memory=first, action=MemoryEvent.Action.SUPERSEDED)
    version = MemoryEvent.objects.get(memory=second, action=MemoryEvent.Action.VERSION)
    # The reason of the edit quoted the old code; both sides of the edit lose it.
    assert superseded.reason == REDACTED_CONTENT
    assert version.reason == REDACTED_CONTENT
    assert superseded.data == {"from": "active", "successor": second.pk}


def test_it_scrubs_other_events_that_quote_the_text(alice, chain):
    first, _ = chain
    other = make_memory(alice, "Uses the gym on Mondays.")
    other.archive(reason="wrong: Gym locker code is 4411. was the real note", actor=alice)

    redaction.redact(first, reason="a secret", actor=alice)

    archived = MemoryEvent.objects.get(memory=other, action=MemoryEvent.Action.ARCHIVED)
    assert archived.reason == REDACTED_CONTENT
    other.refresh_from_db()
    assert other.content == "Uses the gym on Mondays."


def test_it_refuses_to_redact_twice(alice, chain):
    first, second = chain
    redaction.redact(first, reason="a secret", actor=alice)

    with pytest.raises(IllegalTransition) as refused:
        redaction.redact(first, reason="again", actor=alice)

    assert refused.value.status == Status.REDACTED
    assert refused.value.head_id == second.pk
    # The chain option still erases what is left.
    assert redaction.redact(second, chain=True, reason="all of it", actor=alice).memory_ids == [
        second.pk
    ]
    with pytest.raises(IllegalTransition):
        redaction.redact(second, chain=True, reason="all of it", actor=alice)


@pytest.mark.parametrize("reason", ["", "   "])
def test_it_needs_a_reason(alice, chain, reason):
    first, _ = chain

    with pytest.raises(RedactionRefused) as refused:
        redaction.redact(first, reason=reason, actor=alice)

    assert refused.value.code == "reason_required"
    first.refresh_from_db()
    assert first.status == Status.SUPERSEDED


@pytest.mark.parametrize("reason", ["it said gym locker code is 4411.", "about the gym"])
def test_it_refuses_a_reason_that_quotes_the_text_or_names_an_entity(alice, chain, reason):
    first, _ = chain

    with pytest.raises(RedactionRefused) as refused:
        redaction.redact(first, reason=reason, actor=alice)

    assert refused.value.code == "reason_quotes_text"
    first.refresh_from_db()
    assert first.content == "Gym locker code is 4411."


@pytest.mark.parametrize("status", [Status.PROPOSED, Status.REJECTED, Status.ARCHIVED])
def test_it_redacts_from_every_status(alice, status):
    memory = make_memory(alice, "Something private.", status=status)

    redaction.redact(memory, reason="private", actor=alice)

    memory.refresh_from_db()
    assert memory.status == Status.REDACTED
    assert MemoryEvent.objects.get(memory=memory).data["from"] == status


def test_a_redacted_memory_cannot_change_state_again(alice, chain):
    first, second = chain
    redaction.redact(second, reason="a secret", actor=alice)

    for action in ("confirm", "reject", "reconfirm", "archive"):
        with pytest.raises(IllegalTransition):
            getattr(second, action)(actor=alice)
    with pytest.raises(IllegalTransition):
        second.supersede("Gym locker code is 1234.", actor=alice)
    with pytest.raises(IllegalTransition):
        Memory.merge([second, make_memory(alice, "Another fact.")], "Merged.")
    second.refresh_from_db()
    assert second.status == Status.REDACTED


def test_retrieval_never_returns_it_and_its_indexes_match_a_rebuild(alice):
    kept = make_memory(alice, "Walks the dog in Parc Monceau.", entities=["Monceau"])
    secret = Memory.remember(
        alice,
        "Quasar clinic appointment about the rash.",
        Memory.Type.EPISODIC,
        entities=["Quasar clinic", "Monceau"],
    )
    assert secret.pk in [item.memory.pk for item in recall(alice, "quasar clinic").memories]

    redaction.redact(secret, reason="health", actor=alice)

    assert recall(alice, "quasar clinic rash").memories == []
    assert not Posting.objects.filter(memory_id=secret.pk).exists()
    # The erased name leaves the dictionary; the shared one counts one memory now.
    assert dict(OwnerEntity.objects.filter(owner=alice).values_list("key", "memories")) == {
        "monceau": 1
    }
    assert_indexes_match_rebuild()
    assert kept.pk in [item.memory.pk for item in recall(alice, "Monceau").memories]


def assert_indexes_match_rebuild() -> None:
    """Trigger-kept postings, dictionary and BM25 sums equal what the rebuilds make."""

    def snapshot(cursor):
        cursor.execute("SELECT * FROM retrieval_posting ORDER BY 1, 2, 3, 4")
        postings = cursor.fetchall()
        cursor.execute(
            "SELECT owner_id, key, memories FROM retrieval_ownerentity WHERE memories > 0 "
            "ORDER BY 1, 2"
        )
        entities = cursor.fetchall()
        cursor.execute(
            "SELECT owner_id, sum(documents), sum(total_length) FROM retrieval_ownercorpuschange "
            "GROUP BY owner_id HAVING sum(documents) <> 0 ORDER BY 1"
        )
        return postings, entities, cursor.fetchall()

    with connection.cursor() as cursor:
        kept = snapshot(cursor)
        index.rebuild()
        assert snapshot(cursor) == kept


def test_it_drops_the_embedding_and_the_background_embedder_leaves_it_alone(alice):
    from memories.tasks import embed_memory

    memory = make_memory(alice, "Private note.", embedding=vector(1.0))

    redaction.redact(memory, reason="private", actor=alice)

    memory.refresh_from_db()
    assert memory.embedding is None
    assert embed_memory(memory.pk) is False


def test_it_scrubs_its_own_metadata_of_the_text(alice):
    memory = make_memory(
        alice,
        "Sister is called Ingrid.",
        entities=["Ingrid"],
        metadata={"note": "about Ingrid", "turn": 3, "phase": "turn_end"},
    )

    redaction.redact(memory, reason="she asked", actor=alice)

    memory.refresh_from_db()
    assert memory.metadata == {"note": REDACTED_CONTENT, "turn": 3, "phase": "turn_end"}
