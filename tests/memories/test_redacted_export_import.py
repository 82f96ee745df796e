"""Export writes a redacted memory as the stub; import keeps it redacted, chain and all."""

from __future__ import annotations

import json
import re

import pytest

from memories import redaction
from memories.io import export_lines, import_memories, parse_line
from memories.models import REDACTED_CONTENT, Memory
from tests.base import make_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(alice):
    first = make_memory(alice, "Bank PIN is 2468.", entities=["Bank"], metadata={"turn": 2})
    second = first.supersede("Bank PIN is 1357.")
    third = second.supersede("Banks with Nordbank.", entities=["Nordbank"])
    redaction.redact(Memory.objects.get(pk=second.pk), reason="a PIN", actor=alice)
    redaction.redact(Memory.objects.get(pk=first.pk), reason="a PIN", actor=alice)
    return first, second, third


def test_export_writes_the_stub_and_the_redacted_status(alice, history):
    first, second, third = history

    lines = [json.loads(line) for line in export_lines(alice)]

    assert "2468" not in json.dumps(lines) and "1357" not in json.dumps(lines)
    by_id = {line["id"]: line for line in lines}
    for redacted in (first, second):
        line = by_id[redacted.pk]
        assert (line["status"], line["content"], line["entities"], line["embedding"]) == (
            "redacted",
            REDACTED_CONTENT,
            [],
            None,
        )
    assert by_id[first.pk]["superseded_by"] == second.pk
    assert by_id[second.pk]["superseded_by"] == third.pk
    assert by_id[third.pk]["content"] == "Banks with Nordbank."


def test_import_of_an_export_keeps_the_redaction_and_the_chain(alice, bob, history):
    _, _, third = history
    lines = list(export_lines(alice))

    result = import_memories(lines, bob)

    assert (result.imported, result.errors) == (3, [])
    imported = list(Memory.objects.filter(owner=bob).order_by("id"))
    assert [(m.status, m.content) for m in imported] == [
        (Memory.Status.REDACTED, REDACTED_CONTENT),
        (Memory.Status.REDACTED, REDACTED_CONTENT),
        (Memory.Status.ACTIVE, "Banks with Nordbank."),
    ]
    assert [m.superseded_by_id for m in imported] == [imported[1].pk, imported[2].pk, None]
    assert Memory.objects.for_owner(bob).active().get().content == "Banks with Nordbank."


@pytest.mark.parametrize(
    "record, message",
    [
        ({"content": "Not erased.", "status": "redacted"}, "content must be '[redacted]'"),
        ({"content": REDACTED_CONTENT, "status": "redacted", "entities": ["Bank"]}, "no entities"),
        ({"content": REDACTED_CONTENT, "status": "active", "superseded_by": 7}, "not superseded"),
    ],
)
def test_import_refuses_a_redacted_line_that_still_says_something(record, message):
    from django.utils import timezone

    from memories.io import BadLine

    with pytest.raises(BadLine, match=re.escape(message)):
        parse_line(json.dumps({"type": "semantic", **record}), now=timezone.now())


def test_import_accepts_a_redacted_head(bob):
    lines = [
        json.dumps(
            {
                "id": 1,
                "type": "semantic",
                "content": "Old.",
                "status": "superseded",
                "superseded_by": 2,
            }
        ),
        json.dumps(
            {"id": 2, "type": "semantic", "content": REDACTED_CONTENT, "status": "redacted"}
        ),
    ]

    result = import_memories(lines, bob)

    assert result.errors == []
    old, head = Memory.objects.filter(owner=bob).order_by("id")
    assert (old.superseded_by_id, head.status) == (head.pk, Memory.Status.REDACTED)
