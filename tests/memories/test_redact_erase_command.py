"""`redact --erase-from-disk`: the command runs the erase from disk itself, at once."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core.management import call_command

from memories.disk_erase import DiskErase
from memories.models import Memory
from tests.memories.test_redaction import relation_files_holding

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_redacts_then_erases_from_disk_at_once(alice):
    marker = f"zq{uuid.uuid4().hex[:12]}x"
    memory = Memory.remember(
        alice, f"The alarm code is {marker}.", Memory.Type.SEMANTIC, entities=[f"{marker}corp"]
    )
    assert relation_files_holding(marker)  # the scan finds what it looks for
    out = io.StringIO()

    call_command(
        "redact",
        str(memory.pk),
        owner="alice",
        reason="by mistake",
        erase_from_disk=True,
        stdout=out,
    )

    [erase] = DiskErase.objects.all()
    assert (erase.state, erase.via) == ("complete", "command")
    assert f"Erased from disk (complete): {erase.outcome}." in out.getvalue()
    assert relation_files_holding(marker) == []
