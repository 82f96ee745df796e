"""The channel vocabulary, and the models that live in their own modules."""

from __future__ import annotations

import pytest

from memories import api_tokens, idempotency_records, models
from memories.models import MemoryEvent
from memories.vocabulary import VIA_LABELS
from tests.base import make_memory


def test_it_names_every_channel_in_one_vocabulary():
    assert set(VIA_LABELS) == set(MemoryEvent.Via.values)
    assert VIA_LABELS[MemoryEvent.Via.PAGE] == "these pages"
    assert MemoryEvent._meta.get_field("via").choices == MemoryEvent.Via.choices


@pytest.mark.django_db
def test_it_refuses_an_unknown_channel(alice):
    memory = make_memory(alice, "Likes tea.", status="proposed")
    with pytest.raises(ValueError):
        memory.confirm(via="carrier pigeon")
    memory.refresh_from_db()
    assert memory.status == "proposed"


def test_it_keeps_the_tables_and_the_old_imports_of_moved_models():
    assert models.ApiToken is api_tokens.ApiToken
    assert models.IdempotencyRecord is idempotency_records.IdempotencyRecord
    assert api_tokens.ApiToken._meta.db_table == "memories_apitoken"
    assert idempotency_records.IdempotencyRecord._meta.db_table == "memories_idempotencyrecord"
