"""Models that live in modules of their own, next to the code that uses them."""

from __future__ import annotations

from memories import idempotency_records, models, tokens


def test_it_keeps_the_tables_and_the_old_imports_of_moved_models():
    assert models.ApiToken is tokens.ApiToken
    assert models.IdempotencyRecord is idempotency_records.IdempotencyRecord
    assert tokens.ApiToken._meta.db_table == "memories_apitoken"
    assert idempotency_records.IdempotencyRecord._meta.db_table == "memories_idempotencyrecord"
