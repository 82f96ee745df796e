"""Tables the retrieval legs read besides the memories themselves."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
