"""`manage.py redact --owner U ID [--chain] --reason …`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memories.models import REDACTED_CONTENT, Memory, MemoryEvent
from tests.base import make_memory

pytestmark = pytest.mark.django_db


def redact(*args: str) -> str:
    out = StringIO()
    call_command("redact", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def chain(alice):
    first = make_memory(alice, "Salary is 84,000.", entities=["salary"])
    second = first.supersede("Salary is 91,000.", reason="raise")
    first.refresh_from_db()
    return first, second


def test_it_redacts_one_version(alice, chain):
    first, second = chain

    output = redact(str(first.pk), "--owner", "alice", "--reason", "private")

    first.refresh_from_db()
    assert (first.status, first.content) == (Memory.Status.REDACTED, REDACTED_CONTENT)
    assert Memory.objects.get(pk=second.pk).content == "Salary is 91,000."
    assert output.startswith(f"Redacted memory {first.pk} of alice (1 version, ")
    assert "84,000" not in output
    event = MemoryEvent.objects.get(memory=first, action=MemoryEvent.Action.REDACTED)
    assert (event.actor, event.via, event.reason) == (None, "command", "private")


def test_it_redacts_the_chain(alice, chain):
    first, second = chain

    output = redact(str(second.pk), "--owner", "alice", "--chain", "--reason", "private")

    assert "(2 versions" in output
    assert set(Memory.objects.values_list("status", flat=True)) == {Memory.Status.REDACTED}


def test_it_refuses_another_owners_memory(bob, chain):
    first, _ = chain

    with pytest.raises(CommandError, match=f"bob has no memory {first.pk}"):
        redact(str(first.pk), "--owner", "bob", "--reason", "x")
    with pytest.raises(CommandError, match="no owner named 'nobody'"):
        redact(str(first.pk), "--owner", "nobody", "--reason", "x")
    assert Memory.objects.get(pk=first.pk).status == Memory.Status.SUPERSEDED


def test_it_explains_a_refusal(alice, chain):
    first, _ = chain
    redact(str(first.pk), "--owner", "alice", "--reason", "private")

    with pytest.raises(CommandError, match="it is redacted"):
        redact(str(first.pk), "--owner", "alice", "--reason", "private")
    with pytest.raises(CommandError, match="needs a reason"):
        redact(str(chain[1].pk), "--owner", "alice", "--reason", " ")
    with pytest.raises(CommandError, match="quotes the text"):
        redact(str(chain[1].pk), "--owner", "alice", "--reason", "it said Salary is 91,000.")


def test_it_needs_the_reason_argument(alice, chain):
    with pytest.raises(CommandError, match="--reason"):
        redact(str(chain[0].pk), "--owner", "alice")
