"""Tables the retrieval legs read besides the memories themselves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection, models

from memories.models import Memory, loaded_row


class OwnerEntity(models.Model):
    """How many of an owner's active memories name an entity (lower-cased).

    The entity leg looks the query's word stretches up here, one index probe
    each, instead of scanning memories. A trigger on the memory table keeps the
    counts (migrations 0002 and 0003): they are right after every write, whatever wrote.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.DO_NOTHING, related_name="+")
    key = models.TextField()
    memories = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="owner_entity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.memories})"


class Posting(models.Model):
    """One term of one active memory: the text and entity legs' inverted index.

    A term is one of the memory's English lexemes (with its frequency and the
    memory's length, for BM25) or one of its entity names, lower-cased. The
    primary key INCLUDEs everything the legs rank by, so they read an owner's
    postings by an index-only scan instead of the wide memory rows. Triggers
    on the memory table keep it (migration 0004).
    """

    class Kind(models.TextChoices):
        LEXEME = "l", "Lexeme"
        ENTITY = "e", "Entity"

    pk = models.CompositePrimaryKey("owner_id", "kind", "term", "memory_id")
    owner_id = models.BigIntegerField()
    kind = models.CharField(max_length=1, choices=Kind.choices)
    term = models.TextField()
    memory_id = models.BigIntegerField()
    frequency = models.IntegerField()
    length = models.IntegerField()
    type = models.CharField(max_length=16)
    created_at = models.DateTimeField()
    last_confirmed_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.term} ({self.memory_id})"


class OwnerCorpusChange(models.Model):
    """One statement's change to an owner's BM25 corpus: active memories and length.

    BM25 needs N and the average memory length of the owner's corpus on every
    query; counted from the memories, that is one read of every active row
    (one page each where owners' rows are interleaved). Triggers on the memory
    table add one row per statement and owner (migration 0006): an owner's N
    and total length are the sums of their rows, one index-only range read.
    Appending rather than updating one counter means no writer ever waits for
    another on it (an import's open transaction included). The daily job folds
    each owner's rows into one (``timothy_compact_owner_corpus()``).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.DO_NOTHING, related_name="+")
    documents = models.BigIntegerField()
    # Σ length(tsv): the number of distinct lexemes of each active memory.
    total_length = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(
                fields=["owner"],
                include=["documents", "total_length"],
                name="owner_corpus_change_owner",
            )
        ]

    def __str__(self) -> str:
        return f"{self.documents:+d} memories"


class RetrievalStamp(models.Model):
    """When recall last put a memory into a block (``Memory.last_retrieved_at``):
    the archival rule for episodic memories reads it (memories/consolidation.py).

    Kept in a narrow table of its own rather than on the memory's row. A stamp
    written to the row rewrote it whole: a new entry in each of its ten
    indexes (an insert into the HNSW graph among them: one recall's 14 stamps
    took 76 ms at the median at 1M memories), and its page lost its
    all-visible bit, so the vector leg's index-only scan went back to the
    table for every row on it until the next vacuum (docs/benchmarks.md,
    "Recall's stamps, kept apart").
    """

    memory = models.OneToOneField(
        Memory, models.PROTECT, primary_key=True, related_name="retrieval_stamp"
    )
    # The memory's owner again: every table is keyed by owner (docs/scaling.md).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="+")
    last_retrieved_at = models.DateTimeField()

    class Meta:
        # The table memories 0021 made, when the model was the memories app's;
        # moving the model to retrieval moved no data.
        db_table = "memories_retrievalstamp"

    def __str__(self) -> str:
        return f"memory {self.memory_id} retrieved {self.last_retrieved_at:%Y-%m-%d %H:%M}"

    @classmethod
    def attach(cls, memory: Memory, last_retrieved_at: datetime | None) -> None:
        """Set ``memory.last_retrieved_at`` as read from the database (or just
        written) without another query: None is "never retrieved"."""
        stamp = None
        if last_retrieved_at is not None:
            stamp = loaded_row(
                cls,
                {
                    "memory_id": memory.pk,
                    "owner_id": memory.owner_id,
                    "last_retrieved_at": last_retrieved_at,
                },
                memory._state.db,
            )
        Memory.retrieval_stamp.related.set_cached_value(memory, stamp)

    @classmethod
    def record(cls, owner_id: int, memory_ids: Sequence[int], at: datetime) -> None:
        """Stamp each of the owner's memories among ``memory_ids`` as retrieved
        ``at``, in one statement; a stamp never moves back (a slower thread's
        older stamp loses), and another owner's memory is left alone."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO {cls._meta.db_table} (memory_id, owner_id, last_retrieved_at)
                SELECT m.id, m.owner_id, %(at)s FROM {Memory._meta.db_table} m
                WHERE m.owner_id = %(owner_id)s AND m.id = ANY(%(ids)s)
                ORDER BY m.id
                ON CONFLICT (memory_id) DO UPDATE
                SET last_retrieved_at = EXCLUDED.last_retrieved_at
                WHERE {cls._meta.db_table}.last_retrieved_at < EXCLUDED.last_retrieved_at
                """,
                {"at": at, "owner_id": owner_id, "ids": list(memory_ids)},
            )
