"""Entities of a memory written without any: found offline, deterministically.

A memory posted as "My sister Ana lives in Lisbon" names two entities the entity
leg could match, but nobody said so. At write time, for a memory given no
entities, the store takes:

- the owner's known entities (names their active memories already carry)
  that the text names, whatever their case, and
- proper-noun spans: runs of capitalised words ("Celia Hammond Animal Trust",
  "Bank of England"), except a lone capitalised word opening a sentence
  ("Started", "Her") unless the text capitalises it elsewhere too, calendar
  words and the pronoun "I".

An explicit list from the caller always wins. Measured in docs/evaluation.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from django.db import connection, transaction

from memories.models import MAX_ENTITIES, Memory, normalize_entities
from memories.proper_nouns import known_names_in, proper_noun_spans, word_runs
from retrieval.models import OwnerEntity, Posting

# Most entities kept for one memory: the model's limit.
MAX_FOUND = MAX_ENTITIES


def find_entities(text: str, known_keys: Iterable[str] = ()) -> list[str]:
    """Entities of ``text``: known names first, then proper-noun spans, de-duplicated."""
    return normalize_entities([*known_names_in(text, known_keys), *proper_noun_spans(text)])[
        :MAX_FOUND
    ]


def owner_known_keys(owner_id: int, text: str) -> list[str]:
    """The owner's entity keys (retrieval.models.OwnerEntity) that the text could name.

    One index probe per run of words in the text, as the entity leg does for a query.
    """
    runs = sorted(word_runs(text))
    if not runs:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT key FROM {OwnerEntity._meta.db_table} "
            "WHERE owner_id = %s AND memories > 0 AND key = ANY(%s::text[])",
            [owner_id, runs],
        )
        return [row[0] for row in cursor.fetchall()]


def owner_entity_keys(owner_id: int) -> list[str]:
    """Every entity key the owner's active memories carry (for bulk loads)."""
    return list(
        OwnerEntity.objects.filter(owner_id=owner_id, memories__gt=0).values_list("key", flat=True)
    )


def entities_for(owner_id: int, text: str) -> list[str]:
    """What a memory of ``owner_id`` written without entities gets (see the module docstring)."""
    return find_entities(text, owner_known_keys(owner_id, text))


class EntityFinder:
    """``find_entities`` with the known names kept in memory (bulk loads, evaluation)."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self.known_keys: set[str] = set()
        self.learn(known)

    def learn(self, names: Iterable[str]) -> None:
        self.known_keys.update(" ".join(name.lower().split()) for name in names)

    def find(self, text: str) -> list[str]:
        return find_entities(text, self.known_keys)


def fill_missing_entities(
    owner_id: int | None = None,
    *,
    batch_size: int = 500,
    dry_run: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Find entities for every memory that has none (any status), owner by owner.

    Returns (memories looked at, memories given entities). Memories written
    before the store found entities by itself get what they would get today;
    the database lets entities be filled in once, never changed
    (memories/migrations/0006). Oldest first, so a name learnt from one
    memory is found in the next.
    """
    missing = Memory.objects.filter(entity_refs=[])
    if owner_id is not None:
        missing = missing.filter(owner_id=owner_id)
    owners = sorted(set(missing.values_list("owner_id", flat=True)))
    looked_at = filled = 0
    for owner in owners:
        finder = EntityFinder(known=owner_entity_keys(owner))
        rows = missing.filter(owner_id=owner).order_by("created_at", "pk")
        batch: list[dict] = []
        for memory_id, content in rows.values_list("pk", "content").iterator(chunk_size=batch_size):
            looked_at += 1
            found = finder.find(content)
            finder.learn(found)
            if found:
                batch.append({"id": memory_id, "refs": found})
            if len(batch) >= batch_size:
                filled += _write_entities(batch, dry_run)
                batch = []
                if on_batch:
                    on_batch(looked_at)
        filled += _write_entities(batch, dry_run)
        if on_batch:
            on_batch(looked_at)
    return looked_at, filled


def _write_entities(batch, dry_run) -> int:
    if not batch or dry_run:
        return len(batch)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Memory._meta.db_table} AS m SET entity_refs = v.refs
            FROM jsonb_to_recordset(%s::jsonb) AS v(id bigint, refs text[])
            WHERE m.id = v.id AND cardinality(m.entity_refs) = 0
            """,
            [json.dumps(batch)],
        )
        return cursor.rowcount


def forget_redacted_names(
    owner_id: int, keys: Iterable[str], was_active: bool
) -> tuple[int, list[str]]:
    """A redaction's part in the index: the owner's dictionary keeps a key at
    count 0 when its last memory leaves (retrieval 0003), and a redacted name
    must not stay as a key. Returns (keys dropped, the index tables to vacuum:
    both when a key went or the memory was active, whose postings went)."""
    keys = sorted(set(keys))
    dropped = 0
    if keys:
        dropped, _ = OwnerEntity.objects.filter(
            owner_id=owner_id, key__in=keys, memories__lte=0
        ).delete()
    if dropped or was_active:
        return dropped, [OwnerEntity._meta.db_table, Posting._meta.db_table]
    return dropped, []
