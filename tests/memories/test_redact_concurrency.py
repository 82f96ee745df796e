"""Concurrent redactions and edits of one chain: the row locks keep it whole."""

from __future__ import annotations

import pytest

from memories import redaction
from memories.models import REDACTED_CONTENT, IllegalTransition, Memory, MemoryEvent
from tests.base import make_memory
from tests.memories.test_models_concurrency import run_at_once

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 8


def test_concurrent_chain_redactions_erase_each_version_once(alice):
    first = make_memory(alice, "Lives at 12 Rue Cler.")
    second = first.supersede("Lives at 40 Rue Cler.")
    third = second.supersede("Lives at 41 Rue Cler.")
    ids = [first.pk, second.pk, third.pk]

    def redact(index: int):
        memory = Memory.objects.get(pk=ids[index % 3])
        return redaction.redact(memory, chain=True, reason="moved away", actor=alice)

    outcomes = run_at_once(WRITERS, redact)

    assert sum(not isinstance(o, Exception) for o in outcomes) == 1
    assert all(isinstance(o, IllegalTransition) for o in outcomes if isinstance(o, Exception))
    assert set(Memory.objects.values_list("content", flat=True)) == {REDACTED_CONTENT}
    redactions = MemoryEvent.objects.filter(action=MemoryEvent.Action.REDACTED)
    assert sorted(redactions.values_list("memory_id", flat=True)) == ids


def test_a_chain_redaction_racing_an_edit_erases_the_new_version_too(alice):
    first = make_memory(alice, "Lives at 12 Rue Cler.")
    head = first.supersede("Lives at 40 Rue Cler.")

    def work(index: int):
        if index == 0:
            return Memory.objects.get(pk=head.pk).supersede("Lives at 41 Rue Cler.")
        return redaction.redact(
            Memory.objects.get(pk=first.pk), chain=True, reason="moved", actor=alice
        )

    outcomes = run_at_once(2, work)

    # Whichever came first, no version of the chain keeps its text, or the edit was refused.
    chain = Memory.objects.chain(first.pk)
    assert {m.content for m in chain} == {REDACTED_CONTENT}
    assert isinstance(outcomes[1], Exception) is False
    if isinstance(outcomes[0], Memory):
        assert len(chain) == 3
    else:
        assert isinstance(outcomes[0], IllegalTransition)
        assert len(chain) == 2
