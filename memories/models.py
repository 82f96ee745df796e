"""The memory store: typed, staged, versioned memories that are never deleted.

Every state change is a method here, atomic and under a row lock, and leaves an
event in the append-only log. The database enforces the invariants too (see the
check constraints below and the triggers in migration 0001), so that no code
path, the admin included, can break a chain or remove a row.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache, partial

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchQuery, SearchVector, SearchVectorField
from django.core.exceptions import ObjectDoesNotExist
from django.db import connection, models, transaction
from django.db.models import F, Func, Q
from django.db.models.base import ModelState
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.text import Truncator
from pgvector.django import HalfVectorField, HnswIndex, VectorField

from memories import signals
from memories.about import (
    MAX_ASPECT_CHARS,
    MAX_OCCASION_CHARS,
    MAX_OWNER_NAME_MEMORIES,
    MAX_SUBJECT_CHARS,
    NAME_ASPECTS,
    ORGANISATION,
    PERSON,
    PET,
    SELF,
    About,
    KnownSubjects,
    about_fields,
    about_of,
    derive_about,
    owner_names_of,
    split_subject,
)
from memories.matching import search_terms, term_pattern
from memories.rules import REDACTED_CONTENT, MemoryIsPermanent  # noqa: F401 (re-exported)

EMBEDDING_DIMENSIONS = settings.EMBEDDING_DIMENSIONS
# The HNSW index on active embeddings. ef_construction 96, between pgvector's
# 64 and the 128 of memories 0004-0018: at 64 about 0.3% of consolidation's
# probes got lost in the graph and a planted near-duplicate pair in 4,375 went
# unlinked; at 96, 0.03-0.04% and none in six runs, and the graph builds a
# quarter faster than at 128 (docs/consolidation.md).
EMBEDDING_HNSW_M = 16
EMBEDDING_HNSW_EF_CONSTRUCTION = 96
EMBEDDING_HNSW_INDEX = "memory_embedding_hnsw"


def embedding_graph_index(dimensions: int) -> HnswIndex:
    """The HNSW graph over active memories' vectors, for ``dimensions``-d vectors.

    The graph holds each vector at half precision (``halfvec``): half the
    memory, and less time to build (docs/benchmarks.md).
    It only chooses the candidates; every distance a search returns is computed
    again from the stored float32 vector (``memories.vectors.graph_distance``).
    The cast names the dimension, so the index follows the column when a new
    model changes it (``retrieval.index.hnsw_create_sql``).
    """
    return HnswIndex(
        OpClass(
            Cast("embedding", HalfVectorField(dimensions=dimensions)), name="halfvec_cosine_ops"
        ),
        name=EMBEDDING_HNSW_INDEX,
        m=EMBEDDING_HNSW_M,
        ef_construction=EMBEDDING_HNSW_EF_CONSTRUCTION,
        condition=Q(status="active"),
    )


# The embedding at unit length and half precision, which the vector leg's exact
# scan shortlists from (``embedding_half_field``).
EMBEDDING_HALF = "embedding_half"


def embedding_half_field(dimensions: int) -> models.GeneratedField:
    """The embedding scaled to unit length and stored at half precision
    (``halfvec``), kept by PostgreSQL from ``embedding`` whatever writes it.

    The vector leg's exact scan reads it from the covering index
    (``embedding_scan_index``), whose entries it makes half as wide, to
    shortlist an owner's nearest memories, and then scores the shortlist from
    the float32 vectors (``retrieval.legs``). Scaled first because a cosine does
    not see the scale and no component of a unit vector overflows half
    precision (±65,504). The dimension follows the column's, as the graph's.
    """
    half = HalfVectorField(dimensions=dimensions, null=True)
    return models.GeneratedField(
        expression=Cast(Func("embedding", function="l2_normalize"), half),
        output_field=half,
        db_persist=True,
    )


def embedding_scan_index() -> models.Index:
    """The vector leg's exact scan: an owner's active vectors at half precision,
    read index-only (built by memories 0020; retrieval.index rebuilds it with
    the column when a new model changes the dimension)."""
    return models.Index(
        fields=["owner", "created_at"],
        include=["id", "type", EMBEDDING_HALF],
        name="memory_active_embeddings",
        condition=Q(status="active", embedding__isnull=False),
    )


# What a memory and a change to it may hold, however they come in (API, pages,
# import, extraction, consolidation), each checked by one function below
# (``check_content``, ``check_entities``, ``check_reason``, ``check_session_id``,
# ``check_search``, ``check_entity_filter``). The constructors, ``supersede``,
# ``edit`` and ``log`` call them; the API's serializers and the pages' forms
# call the same functions and pass their ``InvalidMemory`` message on as it is,
# so both surfaces refuse the same values in the same words (docs/api.md
# "Limits"); they never state a limit of their own. The longest content is a
# setting, ``settings.MAX_CONTENT_CHARS`` (TIMOTHY_MAX_CONTENT_CHARS), read on each call.
MAX_ENTITIES = 50
MAX_ENTITY_CHARS = 200
MAX_REASON_CHARS = 1000
MAX_SESSION_ID_CHARS = 200
# The longest search text of a memory list (``MemoryQuerySet.matching``).
MAX_SEARCH_CHARS = 500


# What draws nothing on a page: spaces and line breaks, controls, format
# characters (zero-width, bidi, tag characters U+E0000-E007F), unassigned and
# private code points, lone marks, and the letters that render blank.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me", "Zs", "Zl", "Zp"})
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def has_visible_text(text: str) -> bool:
    return any(
        not char.isspace()
        and char not in BLANK_LETTERS
        and unicodedata.category(char) not in INVISIBLE_CATEGORIES
        for char in text
    )


class InvalidMemory(ValueError):
    """A value that breaks a memory rule: ``field`` names it, ``message`` says why.

    The API answers it 400 (``"<field>: <message>"``), the pages as the field's
    form error, import as the line's error.
    """

    def __init__(self, field: str, message: str, code: str = "invalid") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.code = code


class BlankContent(InvalidMemory):
    """Content with nothing a reader can see: it would be a memory that looks empty."""

    message = "Content must have visible text, not only spaces or invisible characters."

    def __init__(self) -> None:
        super().__init__("content", self.message, "blank")


class TooLong(InvalidMemory):
    def __init__(self, field: str, length: int, limit: int) -> None:
        super().__init__(
            field, f"At most {limit} characters are accepted; this is {length}.", "max_length"
        )
        self.limit = limit


NO_WORD_MESSAGE = "Content must say something: at least one word (two letters or digits in a row)."


def _is_word_character(char: str) -> bool:
    """A Han ideograph or a Hangul syllable: a word on its own."""
    return (
        "\u3400" <= char <= "\u9fff"
        or "\uac00" <= char <= "\ud7a3"
        or "\uf900" <= char <= "\ufaff"
        or "\U00020000" <= char <= "\U0003134f"
    )


def has_a_word(text: str) -> bool:
    """Two letters or digits in a row (a script's vowel signs stay inside the word),
    or one ideograph: a lone ``x``, punctuation or an emoji says nothing."""
    run = 0
    for char in text:
        if char.isalnum():
            run += 1
            if run == 2 or _is_word_character(char):
                return True
        elif not (run and unicodedata.category(char) in ("Mn", "Mc")):
            run = 0
    return False


def check_content(content: str) -> str:
    if not has_visible_text(content):
        raise BlankContent
    if not has_a_word(content):
        raise InvalidMemory("content", NO_WORD_MESSAGE, "no_word")
    # A setting: read on each call, not once at import.
    if len(content) > settings.MAX_CONTENT_CHARS:
        raise TooLong("content", len(content), settings.MAX_CONTENT_CHARS)
    return content


def check_entities(entities: Iterable[str]) -> list[str]:
    """Entities as stored (``normalize_entities``), or ``InvalidMemory`` beyond the limits."""
    names = normalize_entities(entities)
    if len(names) > MAX_ENTITIES:
        raise InvalidMemory(
            "entities",
            f"At most {MAX_ENTITIES} entities are accepted; these are {len(names)}.",
            "max_items",
        )
    for name in names:
        if len(name) > MAX_ENTITY_CHARS:
            raise InvalidMemory(
                "entities",
                f"An entity is at most {MAX_ENTITY_CHARS} characters; "
                f"“{name[:40]}…” is {len(name)}.",
                "max_length",
            )
    return names


def fit_entities(entities: Iterable[str]) -> list[str]:
    """Entities nobody typed (found in the text, a merge's union, an LLM's list)
    cut to the limits: over-long names left out, the first ``MAX_ENTITIES`` kept."""
    names = [name for name in normalize_entities(entities) if len(name) <= MAX_ENTITY_CHARS]
    return names[:MAX_ENTITIES]


def check_reason(reason: str) -> str:
    if len(reason or "") > MAX_REASON_CHARS:
        raise TooLong("reason", len(reason), MAX_REASON_CHARS)
    return reason or ""


def check_session_id(session_id: str) -> str:
    if len(session_id or "") > MAX_SESSION_ID_CHARS:
        raise TooLong("session_id", len(session_id), MAX_SESSION_ID_CHARS)
    return session_id or ""


def check_search(text: str) -> str:
    if len(text) > MAX_SEARCH_CHARS:
        raise TooLong("q", len(text), MAX_SEARCH_CHARS)
    return text


def check_entity_filter(name: str) -> str:
    """An entity to filter a memory list by (``MemoryQuerySet.naming``): one name's length."""
    if len(name) > MAX_ENTITY_CHARS:
        raise TooLong("entity", len(name), MAX_ENTITY_CHARS)
    return name


class IllegalTransition(Exception):
    """A state change that the memory's current status does not allow."""

    def __init__(self, memory: Memory, action: str, detail: str = "") -> None:
        self.memory_id = memory.pk
        self.action = action
        self.status = memory.status
        # A superseded version, or a redacted one that had been: name the head.
        self.head_id = memory.head_id() if memory.superseded_by_id is not None else None
        message = f"Cannot {action} memory {memory.pk}: it is {memory.status}"
        if self.head_id is not None:
            message += f"; the head of its chain is memory {self.head_id}"
        if detail:
            message += f" ({detail})"
        super().__init__(message + ".")
        self.message = message + "."


class RedactionRefused(ValueError):
    """A redaction that cannot go ahead as asked: the message says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class MemoryQuerySet(models.QuerySet):
    def for_owner(self, owner) -> MemoryQuerySet:
        return self.filter(owner=owner)

    def active(self) -> MemoryQuerySet:
        return self.filter(status=Memory.Status.ACTIVE)

    def active_at(self, moment: datetime) -> MemoryQuerySet:
        """The versions that were active at ``moment``: confirmed by then and not yet
        superseded, archived (or anything else) — what a replay of the past sees."""
        # A redacted version said nothing, then or now.
        return (
            self.filter(active_since__lte=moment)
            .filter(Q(active_until__isnull=True) | Q(active_until__gt=moment))
            .exclude(status=Memory.Status.REDACTED)
        )

    def pending(self) -> MemoryQuerySet:
        return self.filter(status=Memory.Status.PROPOSED).order_by("created_at", "id")

    def heads(self) -> MemoryQuerySet:
        return self.filter(superseded_by__isnull=True)

    def awaiting_embedding(self) -> MemoryQuerySet:
        """Rows that retrieval can reach (active now, or once confirmed) and
        that have no vector yet."""
        return self.filter(
            status__in=(Memory.Status.ACTIVE, Memory.Status.PROPOSED), embedding__isnull=True
        )

    def naming(self, entity: str) -> MemoryQuerySet:
        """Memories with ``entity`` among their entities: the whole name, ignoring
        case and spacing (as stored: trimmed, inner spaces single)."""
        check_entity_filter(entity)
        name = " ".join(entity.split())
        return self.filter(
            RawSQL(
                "EXISTS (SELECT 1 FROM unnest(entity_refs) AS name WHERE lower(name) = lower(%s))",
                [name],
                output_field=models.BooleanField(),
            )
        )

    def before(self, created_at: datetime, memory_id: int) -> MemoryQuerySet:
        """Memories after this one in newest-first order (``created_at``, then id):
        the next page of a cursor-paginated list."""
        return self.filter(
            Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=memory_id)
        )

    def matching(self, text: str) -> MemoryQuerySet:
        """Memories whose content matches a search, the same for the pages and the API.

        Every word and "quoted phrase" appears, ignoring case and accents, and no
        -excluded one does; or English full-text search matches (memories/matching.py).
        At most ``MAX_SEARCH_CHARS`` characters.
        """
        check_search(text)
        full_text = Q(tsv=SearchQuery(text, config="english", search_type="websearch"))
        terms = search_terms(text)
        if not terms.include:
            return self.filter(full_text)
        words = Q()
        for term in terms.include:
            words &= Q(content__regex=term_pattern(term))
        for term in terms.exclude:
            words &= ~Q(content__regex=term_pattern(term))
        return self.filter(words | full_text)

    def chain(self, memory: Memory | int) -> list[Memory]:
        """Every version in the chain of ``memory``, oldest first, from any member.

        A chain is the head plus everything that flowed into it; merges make it a
        tree (several rows superseded by one), which is returned flattened in
        time order.
        """
        memory_id = memory.pk if isinstance(memory, Memory) else memory
        head_id = Memory.head_id_of(memory_id)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH RECURSIVE versions(id) AS (
                    SELECT %s::bigint
                    UNION
                    SELECT m.id FROM {Memory._meta.db_table} m
                    JOIN versions v ON m.superseded_by_id = v.id
                )
                SELECT id FROM versions
                """,
                [head_id],
            )
            ids = [row[0] for row in cursor.fetchall()]
        return list(self.filter(pk__in=ids).order_by("created_at", "id"))

    def delete(self):
        raise MemoryIsPermanent()


class MemoryType(models.TextChoices):
    SEMANTIC = "semantic", "Fact"
    PREFERENCE = "preference", "Preference"
    EPISODIC = "episodic", "Event"
    REFLECTION = "reflection", "Reflection"


class MemoryStatus(models.TextChoices):
    """proposed → active | rejected; active → superseded | archived.

    A rejected proposal can be restored to the queue (rejected → proposed).

    A proposal can also be superseded directly (edit-then-confirm): the
    edited text becomes the active version and the proposal stays in its
    chain.

    Any status → redacted, and nothing after: the text is erased for good
    (``Memory.redact``), the row keeps its place in its chain.
    """

    PROPOSED = "proposed", "Proposed"
    ACTIVE = "active", "Active"
    REJECTED = "rejected", "Rejected"
    SUPERSEDED = "superseded", "Superseded"
    ARCHIVED = "archived", "Archived"
    REDACTED = "redacted", "Redacted"


class MemorySource(models.TextChoices):
    REMEMBER = "remember", "Remember (owner's explicit fact)"
    EXTRACTION = "extraction", "Extraction from a conversation"
    API = "api", "API"
    CONSOLIDATION = "consolidation", "Consolidation"
    IMPORT = "import", "Import"
    PAGE = "page", "Written or confirmed by the owner on the pages"


class MemoryManager(models.Manager.from_queryset(MemoryQuerySet)):
    def get_queryset(self) -> MemoryQuerySet:
        # Only the exact scan reads the half-precision copy, from its index: a
        # row loaded for anything else leaves it behind rather than parse it.
        return super().get_queryset().defer(EMBEDDING_HALF)


class Memory(models.Model):
    Type = MemoryType
    Status = MemoryStatus
    Source = MemorySource

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="memories")
    type = models.CharField(max_length=16, choices=Type.choices)
    content = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROPOSED)
    entity_refs = ArrayField(models.TextField(), default=list, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_half = embedding_half_field(EMBEDDING_DIMENSIONS)
    tsv = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    confidence = models.FloatField(default=0.5)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    session_id = models.CharField(max_length=MAX_SESSION_ID_CHARS, blank=True, default="")
    # Provenance beyond source and session: extraction phase, turn index, ...
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Moves only on explicit promotion or re-confirmation, never on retrieval.
    last_confirmed_at = models.DateTimeField(null=True, blank=True)
    # When recall last packed it: retrieval.models.RetrievalStamp (the reverse
    # accessor retrieval_stamp, by name: the store imports nothing of retrieval),
    # read as last_retrieved_at.
    # This version's lifetime as an active memory: from its confirmation (or
    # creation, when written active) until it was superseded or archived. Kept
    # by a trigger (migration 0006) whatever writes; a proposal that was never
    # confirmed has neither. Replays of the past (``as_of``) read it.
    active_since = models.DateTimeField(null=True, blank=True, editable=False)
    active_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The row that replaced this one. A merge supersedes several rows with one,
    # so this is many-to-one; a chain has exactly one head (superseded_by is null).
    superseded_by = models.ForeignKey(
        "self", models.PROTECT, null=True, blank=True, related_name="supersedes"
    )
    # What this version is about (memories/about.py): whom or what, which aspect
    # of it, and for an event which occasion. Derived from the text when written
    # (``about_set_by`` "rules"), or given by the owner or an import. An empty
    # kind means not derived yet (``manage.py derive_about`` fills it).
    about_subject = models.CharField(
        max_length=MAX_SUBJECT_CHARS, blank=True, default="", db_default=""
    )
    about_kind = models.CharField(max_length=16, blank=True, default="", db_default="")
    about_aspect = models.CharField(
        max_length=MAX_ASPECT_CHARS, blank=True, default="", db_default=""
    )
    about_occasion = models.CharField(
        max_length=MAX_OCCASION_CHARS, blank=True, default="", db_default=""
    )
    about_set_by = models.CharField(max_length=8, blank=True, default="", db_default="")

    objects = MemoryManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            GinIndex(fields=["tsv"], name="memory_tsv_gin"),
            embedding_graph_index(EMBEDDING_DIMENSIONS),
            models.Index(fields=["owner", "status", "-created_at"], name="memory_owner_status"),
            models.Index(fields=["owner", "session_id"], name="memory_owner_session"),
            # awaiting_embedding(): counted on the home page, read every minute
            # by the embedding catch-up; small, since most rows have a vector.
            models.Index(
                fields=["owner", "id"],
                name="memory_awaiting_embedding",
                condition=Q(embedding__isnull=True, status__in=["active", "proposed"]),
            ),
            models.Index(fields=["superseded_by"], name="memory_superseded_by"),
            # A question about now reads the later memories about what its best
            # candidates are about (retrieval.candidates.load_successors).
            # Whom an owner's memories name (known_subjects_of), read when a new
            # memory names someone by name or relation alone: the index alone
            # answers it, not the rows.
            models.Index(
                fields=["owner", "about_subject", "about_kind"],
                name="memory_owner_subjects",
                condition=Q(about_kind__in=[PERSON, PET, ORGANISATION])
                & ~Q(status=MemoryStatus.REDACTED),
            ),
            models.Index(
                fields=["owner", "about_subject", "about_aspect", "-created_at"],
                name="memory_owner_about",
            ),
            embedding_scan_index(),
        ]
        constraints = [
            models.CheckConstraint(
                name="memory_superseded_has_successor",
                # A redacted row keeps its successor, if it had one: the chain keeps its shape.
                condition=(
                    Q(status="superseded", superseded_by__isnull=False)
                    | Q(status="redacted")
                    | (~Q(status__in=["superseded", "redacted"]) & Q(superseded_by__isnull=True))
                ),
                violation_error_message="A superseded memory needs a successor; "
                "no other memory may have one.",
            ),
            models.CheckConstraint(
                name="memory_redacted_is_blank",
                condition=~Q(status="redacted")
                | Q(
                    content=REDACTED_CONTENT,
                    entity_refs=[],
                    embedding__isnull=True,
                    about_subject="",
                    about_aspect="",
                    about_occasion="",
                ),
                violation_error_message="A redacted memory keeps no text, entities, embedding "
                "or about.",
            ),
            models.CheckConstraint(
                name="memory_not_own_successor", condition=~Q(superseded_by=F("id"))
            ),
            models.CheckConstraint(
                name="memory_confidence_range", condition=Q(confidence__gte=0, confidence__lte=1)
            ),
            models.CheckConstraint(name="memory_content_not_empty", condition=~Q(content="")),
            models.CheckConstraint(
                name="memory_type_known", condition=Q(type__in=MemoryType.values)
            ),
            models.CheckConstraint(
                name="memory_status_known", condition=Q(status__in=MemoryStatus.values)
            ),
        ]

    def __str__(self) -> str:
        return f"[{self.type}] {self.content[:60]}"

    def delete(self, *args, **kwargs):
        raise MemoryIsPermanent()

    # --- reading ---------------------------------------------------------------

    @property
    def about(self) -> About:
        """What this version is about (memories/about.py); derived when not stored yet."""
        return about_of(self)

    @property
    def entities(self) -> list[str]:
        return list(self.entity_refs)

    @property
    def last_retrieved_at(self) -> datetime | None:
        """When recall last put this memory into a block (its ``RetrievalStamp``),
        or None. A list that shows it loads the stamps with
        ``select_related("retrieval_stamp")``; otherwise each memory reads its own."""
        try:
            return self.retrieval_stamp.last_retrieved_at
        except ObjectDoesNotExist:  # retrieval.models.RetrievalStamp.DoesNotExist
            return None

    @property
    def confirmed_or_created_at(self) -> datetime:
        """The moment decay counts from: last confirmation, else creation."""
        return self.last_confirmed_at or self.created_at

    @staticmethod
    def head_id_of(memory_id: int) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH RECURSIVE up(id, next_id, depth) AS (
                    SELECT id, superseded_by_id, 0 FROM {Memory._meta.db_table} WHERE id = %s
                    UNION ALL
                    SELECT m.id, m.superseded_by_id, up.depth + 1
                    FROM {Memory._meta.db_table} m JOIN up ON m.id = up.next_id
                    WHERE up.depth < 10000
                )
                SELECT id FROM up WHERE next_id IS NULL
                """,
                [memory_id],
            )
            row = cursor.fetchone()
        return row[0] if row else memory_id

    def head_id(self) -> int:
        if self.superseded_by_id is None:
            return self.pk
        return Memory.head_id_of(self.pk)

    def chain(self) -> list[Memory]:
        return Memory.objects.chain(self)

    # --- creating --------------------------------------------------------------

    @classmethod
    def propose(
        cls,
        owner,
        content: str,
        type: str,
        *,
        entities: Iterable[str] = (),
        confidence: float = 0.5,
        source: str = MemorySource.API,
        session_id: str = "",
        metadata: dict | None = None,
        actor=None,
        via: str = "api",
        reason: str = "",
        about: About | None = None,
        embedding: Sequence[float] | None = None,
    ) -> Memory:
        """Stage a memory for the owner's confirmation queue (with its vector when
        the caller computed it: written in the same INSERT)."""
        return cls._create(
            owner,
            content,
            type,
            status=cls.Status.PROPOSED,
            entities=entities,
            confidence=confidence,
            source=source,
            session_id=session_id,
            metadata=metadata,
            actor=actor,
            via=via,
            reason=reason,
            action=MemoryEvent.Action.PROPOSED,
            about=about,
            embedding=embedding,
        )

    @classmethod
    def remember(
        cls,
        owner,
        content: str,
        type: str,
        *,
        entities: Iterable[str] = (),
        session_id: str = "",
        metadata: dict | None = None,
        actor=None,
        via: str = "api",
        reason: str = "",
        replaces: Memory | None = None,
        about: About | None = None,
        embedding: Sequence[float] | None = None,
    ) -> Memory:
        """The owner's explicit fact: active at once, full confidence.

        With ``replaces`` (an active memory the fact repeats or updates), the
        fact is written as that memory's new version rather than beside it.
        """
        if replaces is not None:
            if replaces.owner_id != owner.pk:
                raise ValueError("A memory can only replace one of the same owner.")
            return replaces.supersede(
                content,
                type=type,
                entities=entities,
                confidence=1.0,
                source=cls.Source.REMEMBER,
                session_id=session_id,
                actor=actor,
                via=via,
                reason=reason,
                about=about,
                embedding=embedding,
            )
        return cls._create(
            owner,
            content,
            type,
            status=cls.Status.ACTIVE,
            entities=entities,
            confidence=1.0,
            source=cls.Source.REMEMBER,
            session_id=session_id,
            metadata=metadata,
            actor=actor,
            via=via,
            reason=reason,
            action=MemoryEvent.Action.CREATED,
            about=about,
            embedding=embedding,
        )

    @classmethod
    def _create(
        cls,
        owner,
        content: str,
        type: str,
        *,
        status: str,
        entities: Iterable[str],
        confidence: float,
        source: str,
        session_id: str,
        metadata: dict | None,
        actor,
        via: str,
        reason: str,
        action: str,
        about: About | None = None,
        embedding: Sequence[float] | None = None,
    ) -> Memory:
        check_content(content)
        given = check_entities(entities)
        check_reason(reason)
        check_session_id(session_id)
        MemoryEvent.Via(via)
        now = timezone.now()
        with transaction.atomic():
            entity_refs = given or _found_entities(owner.pk, content)
            about = about or derive_about(
                content, type, entities=entity_refs, written=now, **owner_reading(owner)
            )
            memory = cls.objects.create(
                owner=owner,
                type=type,
                content=content,
                status=status,
                entity_refs=entity_refs,
                **about_fields(about),
                confidence=confidence,
                source=source,
                session_id=session_id,
                metadata=metadata or {},
                embedding=list(embedding) if embedding is not None else None,
                created_at=now,
                last_confirmed_at=now if status == cls.Status.ACTIVE else None,
            )
            memory.log(action, actor=actor, via=via, reason=reason)
            transaction.on_commit(lambda: _after_write(memory.pk))
        return memory

    # --- state changes ---------------------------------------------------------

    def _retire_for(self, new: Memory, *, now: datetime, actor, via: str, reason: str, **data):
        """This (locked) row becomes superseded by ``new``, on the record."""
        previous = self.status
        self.status = Memory.Status.SUPERSEDED
        self.superseded_by = new
        lifetime = _lifetime_change(self, previous, self.status, now)
        self.save(update_fields=["status", "superseded_by", *lifetime])
        self.log(
            MemoryEvent.Action.SUPERSEDED,
            actor=actor,
            via=via,
            reason=reason,
            data={"from": previous, "successor": new.pk, **data},
        )

    def _locked(self) -> Memory:
        return Memory.objects.select_for_update().get(pk=self.pk)

    def _refresh_from(self, row: Memory) -> Memory:
        for field in self._meta.concrete_fields:
            if not field.generated:
                setattr(self, field.attname, getattr(row, field.attname))
        return self

    def _change_status(
        self,
        action: str,
        allowed_from: Sequence[str],
        to_status: str,
        *,
        actor,
        via: str,
        reason: str,
        event: str,
        confirm: bool = False,
        by_owner: bool = False,
    ) -> Memory:
        with transaction.atomic():
            row = self._locked()
            if row.status not in allowed_from:
                raise IllegalTransition(row, action)
            # The locked row's status, not this instance's: it may be stale.
            previous_status = row.status
            now = timezone.now()
            row.status = to_status
            fields = ["status"]
            if confirm:
                row.last_confirmed_at = now
                fields.append("last_confirmed_at")
            data = {"from": previous_status}
            if by_owner:
                fields += _take_as_owners(row, data)
            fields += _lifetime_change(row, previous_status, to_status, now)
            row.save(update_fields=fields)
            row.log(event, actor=actor, via=via, reason=reason, data=data)
        return self._refresh_from(row)

    def confirm(
        self,
        *,
        actor=None,
        via: str = "api",
        reason: str = "",
        replaces: Memory | None = None,
        by_owner: bool = False,
    ) -> Memory:
        """proposed → active; stamps last_confirmed_at.

        With ``replaces`` (an active memory of the same owner), the proposal is
        confirmed as that memory's new version, in one transaction: the old
        one becomes superseded and points to this one.

        With ``by_owner`` (the owner confirming on the pages) it takes the
        owner's confidence (1.0) and source (page); the event keeps the
        proposal's (``proposed_confidence``, ``proposed_source``).
        """
        if replaces is not None:
            return self._confirm_replacing(
                replaces, actor=actor, via=via, reason=reason, by_owner=by_owner
            )
        return self._change_status(
            "confirm",
            [Memory.Status.PROPOSED],
            Memory.Status.ACTIVE,
            actor=actor,
            via=via,
            reason=reason,
            event=MemoryEvent.Action.CONFIRMED,
            confirm=True,
            by_owner=by_owner,
        )

    def _confirm_replacing(
        self, old: Memory, *, actor, via: str, reason: str, by_owner: bool = False
    ) -> Memory:
        if old.pk == self.pk:
            raise ValueError("A memory cannot replace itself.")
        with transaction.atomic():
            # Lock both in id order, so two confirmations cannot deadlock.
            rows = {
                row.pk: row
                for row in Memory.objects.select_for_update()
                .filter(pk__in=[self.pk, old.pk])
                .order_by("pk")
            }
            proposal, replaced = rows[self.pk], rows[old.pk]
            if proposal.owner_id != replaced.owner_id:
                raise ValueError("A memory can only replace one of the same owner.")
            if proposal.status != Memory.Status.PROPOSED:
                raise IllegalTransition(proposal, "confirm")
            if replaced.status != Memory.Status.ACTIVE:
                raise IllegalTransition(replaced, "replace", "only an active memory is replaced")
            now = timezone.now()
            proposal.status = Memory.Status.ACTIVE
            proposal.last_confirmed_at = now
            confirmed = {"from": Memory.Status.PROPOSED, "replaces": replaced.pk}
            owners = _take_as_owners(proposal, confirmed) if by_owner else []
            proposal.save(update_fields=["status", "last_confirmed_at", *owners])
            replaced.status = Memory.Status.SUPERSEDED
            replaced.superseded_by = proposal
            replaced.save(update_fields=["status", "superseded_by"])
            proposal.log(
                MemoryEvent.Action.CONFIRMED,
                actor=actor,
                via=via,
                reason=reason,
                data=confirmed,
            )
            replaced.log(
                MemoryEvent.Action.SUPERSEDED,
                actor=actor,
                via=via,
                reason=reason,
                data={"from": Memory.Status.ACTIVE, "successor": proposal.pk},
            )
        old._refresh_from(replaced)
        return self._refresh_from(proposal)

    def restore(self, *, actor=None, via: str = "api", reason: str = "") -> Memory:
        """rejected → proposed: back in the confirmation queue, on the record."""
        return self._change_status(
            "restore",
            [Memory.Status.REJECTED],
            Memory.Status.PROPOSED,
            actor=actor,
            via=via,
            reason=reason,
            event=MemoryEvent.Action.RESTORED,
        )

    def reconfirm(self, *, actor=None, via: str = "api", reason: str = "") -> Memory:
        """active stays active; stamps last_confirmed_at (resets decay)."""
        return self._change_status(
            "reconfirm",
            [Memory.Status.ACTIVE],
            Memory.Status.ACTIVE,
            actor=actor,
            via=via,
            reason=reason,
            event=MemoryEvent.Action.RECONFIRMED,
            confirm=True,
        )

    def reject(self, *, actor=None, via: str = "api", reason: str = "") -> Memory:
        """proposed → rejected."""
        return self._change_status(
            "reject",
            [Memory.Status.PROPOSED],
            Memory.Status.REJECTED,
            actor=actor,
            via=via,
            reason=reason,
            event=MemoryEvent.Action.REJECTED,
        )

    def settle_copies(
        self, copy_ids: Iterable[int], *, actor=None, via: str = "api"
    ) -> list[Memory]:
        """Reject the owner's pending proposals among ``copy_ids`` as duplicates of
        this memory, once it is decided (confirmed or rejected): one decision
        settles every copy of a fact in the queue. Ids that are not the owner's
        pending proposals, and this memory itself, are passed over."""
        reason = Truncator(
            f"Duplicate of memory {self.pk} “{Truncator(self.content).chars(60)}”"
        ).chars(MAX_REASON_CHARS)
        settled = []
        copies = (
            Memory.objects.filter(owner_id=self.owner_id)
            .pending()
            .filter(pk__in=list(copy_ids))
            .exclude(pk=self.pk)
        )
        for copy in copies:
            try:
                copy.reject(actor=actor, via=via, reason=reason)
            except IllegalTransition:
                # Settled by another request in the meantime.
                continue
            settled.append(copy)
        return settled

    def archive(self, *, actor=None, via: str = "api", reason: str = "") -> Memory:
        """active → archived: kept for the record, never retrieved."""
        return self._change_status(
            "archive",
            [Memory.Status.ACTIVE],
            Memory.Status.ARCHIVED,
            actor=actor,
            via=via,
            reason=reason,
            event=MemoryEvent.Action.ARCHIVED,
        )

    def unarchive(self, *, actor=None, via: str = "api", reason: str = "") -> Memory:
        """archived → active (the pages' Undo of an archive): recalled again, with
        a new active lifetime from now (migration 0026 allows it)."""
        return self._change_status(
            "unarchive",
            [Memory.Status.ARCHIVED],
            Memory.Status.ACTIVE,
            actor=actor,
            via=via,
            reason=reason,
            event=MemoryEvent.Action.UNARCHIVED,
        )

    def is_unchanged_by(
        self,
        content: str | None = None,
        *,
        type: str | None = None,
        entities: Iterable[str] | None = None,
        confidence: float | None = None,
        about: About | None = None,
    ) -> bool:
        """Would a new version with these values say exactly what this one says?
        (``None``: keep this one's; entities as ``supersede`` would give them.)"""
        if content is not None and content != self.content:
            return False
        if about is not None and about_fields(about) != about_fields(self.about):
            return False
        if type is not None and type != self.type:
            return False
        if confidence is not None and confidence != self.confidence:
            return False
        return _successor_entities(self, content, entities) == list(self.entity_refs)

    def edit(
        self,
        content: str | None = None,
        *,
        type: str | None = None,
        entities: Iterable[str] | None = None,
        confidence: float | None = None,
        about: About | None = None,
        source: str | None = None,
        by_owner: bool = False,
        replaces: Memory | None = None,
        actor=None,
        via: str = "api",
        reason: str = "",
    ) -> Memory:
        """The one edit path, the pages' and the API's: a new version of an
        active memory, or of a proposal, which the edit confirms.

        An edit that changes nothing (``is_unchanged_by``) writes no version: an
        active memory stays as it is and nothing is written, not even an event;
        a proposal is confirmed as it is (``confirm``). Otherwise ``supersede``
        writes the new active version, and an edited proposal's also gets a
        ``confirmed`` event (``{"from": "proposed", "edited": <proposal>}``).

        With ``by_owner`` (the owner, on the pages) the result carries the
        owner's confidence (1.0) and source (page), and a confirmed proposal's
        event keeps what was proposed (``proposed_confidence``,
        ``proposed_source``); ``confidence`` and ``source`` are not given then.
        Without it (the API) the new version takes the ``confidence`` and
        ``source`` given, else keeps the old version's.

        ``replaces`` (an active memory of the same owner; a proposal's edit
        only): the result is also that memory's new version, in the same
        transaction. A proposal confirmed or rejected meanwhile is an
        ``IllegalTransition`` ("confirm"). Returns the head: this memory when
        no version was written.
        """
        if by_owner and (confidence is not None or source is not None):
            raise ValueError("The owner's edit carries the owner's confidence and source.")
        if content is not None:
            check_content(content)
        if entities is not None:
            entities = check_entities(entities)
        check_reason(reason)
        MemoryEvent.Via(via)
        if replaces is not None and replaces.pk == self.pk:
            raise ValueError("A memory cannot replace itself.")
        seen = self.status
        with transaction.atomic():
            # Lock both in id order, as ``confirm`` does, so that they cannot deadlock.
            wanted = [self.pk] if replaces is None else [self.pk, replaces.pk]
            rows = {
                row.pk: row
                for row in Memory.objects.select_for_update().filter(pk__in=wanted).order_by("pk")
            }
            row = rows[self.pk]
            proposal = row.status == Memory.Status.PROPOSED
            if seen == Memory.Status.PROPOSED and not proposal:
                raise IllegalTransition(row, "confirm")
            if row.status not in (Memory.Status.ACTIVE, Memory.Status.PROPOSED):
                raise IllegalTransition(row, "supersede")
            replaced = None
            if replaces is not None:
                replaced = rows[replaces.pk]
                if not proposal:
                    raise ValueError("Only a proposal is confirmed as a new version of another.")
                if replaced.owner_id != row.owner_id:
                    raise ValueError("A memory can only replace one of the same owner.")
                if replaced.status != Memory.Status.ACTIVE:
                    raise IllegalTransition(
                        replaced, "replace", "only an active memory is replaced"
                    )
            if row.is_unchanged_by(
                content, type=type, entities=entities, confidence=confidence, about=about
            ):
                if not proposal:
                    return self._refresh_from(row)
                return self.confirm(
                    actor=actor, via=via, reason=reason, replaces=replaces, by_owner=by_owner
                )
            if by_owner:
                confidence, source = 1.0, Memory.Source.PAGE
            new = self.supersede(
                content,
                type=type,
                entities=entities,
                confidence=confidence,
                source=source,
                about=about,
                actor=actor,
                via=via,
                reason=reason,
            )
            if proposal:
                confirmed = {"from": Memory.Status.PROPOSED, "edited": row.pk}
                if by_owner:
                    confirmed["proposed_confidence"] = row.confidence
                    confirmed["proposed_source"] = row.source
                if replaced is not None:
                    replaced._retire_for(
                        new, now=new.created_at, actor=actor, via=via, reason=reason
                    )
                    confirmed["replaces"] = replaced.pk
                    replaces._refresh_from(replaced)
                new.log(
                    MemoryEvent.Action.CONFIRMED,
                    actor=actor,
                    via=via,
                    reason=reason,
                    data=confirmed,
                )
        return new

    def supersede(
        self,
        content: str | None = None,
        *,
        type: str | None = None,
        entities: Iterable[str] | None = None,
        confidence: float | None = None,
        source: str | None = None,
        session_id: str | None = None,
        about: About | None = None,
        actor=None,
        via: str = "api",
        reason: str = "",
        embedding: Sequence[float] | None = None,
    ) -> Memory:
        """Write a new active version; this row becomes superseded and points to it.

        Allowed from active, and from proposed (edit-then-confirm). Returns the
        new head; ``embedding`` (the new version's vector, when the caller
        computed it) is written in the same INSERT.
        """
        if content is not None:
            check_content(content)
        if entities is not None:
            entities = check_entities(entities)
        check_reason(reason)
        if session_id is not None:
            check_session_id(session_id)
        MemoryEvent.Via(via)
        with transaction.atomic():
            old = self._locked()
            if old.status not in (Memory.Status.ACTIVE, Memory.Status.PROPOSED):
                raise IllegalTransition(old, "supersede")
            now = timezone.now()
            entity_refs = _successor_entities(old, content, entities)
            new = Memory.objects.create(
                owner_id=old.owner_id,
                type=type or old.type,
                content=old.content if content is None else content,
                status=Memory.Status.ACTIVE,
                entity_refs=entity_refs,
                **about_fields(about or _successor_about(old, content, type, entity_refs, now)),
                confidence=old.confidence if confidence is None else confidence,
                source=source or old.source,
                session_id=old.session_id if session_id is None else session_id,
                metadata=old.metadata,
                embedding=list(embedding) if embedding is not None else None,
                created_at=now,
                last_confirmed_at=now,
            )
            old._retire_for(new, now=now, actor=actor, via=via, reason=reason)
            new.log(
                MemoryEvent.Action.VERSION,
                actor=actor,
                via=via,
                reason=reason,
                data={"supersedes": [old.pk]},
            )
            transaction.on_commit(lambda: _after_write(new.pk))
        self._refresh_from(old)
        return new

    @classmethod
    def merge(
        cls,
        memories: Sequence[Memory | int],
        content: str,
        *,
        type: str | None = None,
        actor=None,
        via: str = "consolidation",
        reason: str = "consolidation",
        embedding: Sequence[float] | None = None,
    ) -> Memory:
        """Supersede several active memories of one owner with one canonical row.

        Entity refs are the union, confidence the maximum, ``last_confirmed_at``
        the latest of the members'. All or nothing.
        """
        check_content(content)
        check_reason(reason)
        MemoryEvent.Via(via)
        ids = sorted({m.pk if isinstance(m, Memory) else int(m) for m in memories})
        if len(ids) < 2:
            raise ValueError("A merge needs at least two memories.")
        with transaction.atomic():
            # Lock in id order so two merges over overlapping groups cannot deadlock.
            rows = list(cls.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
            if len(rows) != len(ids):
                raise ValueError("Some memories to merge do not exist.")
            owners = {row.owner_id for row in rows}
            if len(owners) != 1:
                raise ValueError("Only memories of one owner can be merged.")
            for row in rows:
                if row.status != cls.Status.ACTIVE:
                    raise IllegalTransition(row, "merge")
            entities: list[str] = []
            for row in rows:
                entities.extend(row.entity_refs)
            by_strength = sorted(
                rows, key=lambda r: (r.confidence, r.confirmed_or_created_at), reverse=True
            )
            now = timezone.now()
            new = cls.objects.create(
                owner_id=rows[0].owner_id,
                type=type or by_strength[0].type,
                content=content,
                status=cls.Status.ACTIVE,
                # The members keep all of theirs in the chain.
                entity_refs=fit_entities(entities),
                confidence=max(row.confidence for row in rows),
                source=cls.Source.CONSOLIDATION,
                session_id="",
                metadata={"merged_from": ids},
                **about_fields(
                    derive_about(
                        content,
                        type or by_strength[0].type,
                        entities=entities,
                        written=max(row.created_at for row in rows),
                        **owner_reading(rows[0].owner),
                    )
                ),
                embedding=list(embedding) if embedding is not None else None,
                created_at=now,
                last_confirmed_at=max(row.confirmed_or_created_at for row in rows),
            )
            for row in rows:
                row._retire_for(new, now=now, actor=actor, via=via, reason=reason, merge=True)
            new.log(
                MemoryEvent.Action.MERGED,
                actor=actor,
                via=via,
                reason=reason,
                data={"supersedes": ids},
            )
            if embedding is None:
                transaction.on_commit(lambda: _after_write(new.pk))
        # Callers that passed instances see them superseded, as after supersede().
        by_id = {row.pk: row for row in rows}
        for memory in memories:
            if isinstance(memory, Memory):
                memory._refresh_from(by_id[memory.pk])
        return new

    def lower_confidence(
        self, confidence: float, *, actor=None, via: str = "consolidation", reason: str = ""
    ) -> Memory:
        """Lower an active memory's confidence (decay); the memory stays active."""
        with transaction.atomic():
            row = self._locked()
            if row.status != Memory.Status.ACTIVE:
                raise IllegalTransition(row, "decay")
            previous = row.confidence
            row.confidence = max(0.0, min(previous, confidence))
            row.save(update_fields=["confidence"])
            row.log(
                MemoryEvent.Action.DECAYED,
                actor=actor,
                via=via,
                reason=reason,
                data={"from_confidence": previous, "to_confidence": row.confidence},
            )
        return self._refresh_from(row)

    def log(
        self, action: str, *, actor=None, via: str = "system", reason: str = "", data=None
    ) -> MemoryEvent:
        return MemoryEvent.objects.create(
            memory=self,
            owner_id=self.owner_id,
            action=action,
            actor=actor if getattr(actor, "pk", None) else None,
            via=MemoryEvent.Via(via),
            reason=check_reason(reason),
            data=data or {},
        )


def normalize_entities(entities: Iterable[str]) -> list[str]:
    """Trimmed, de-duplicated (case-insensitively), first spelling kept, in order."""
    seen: set[str] = set()
    result: list[str] = []
    for entity in entities:
        name = " ".join(str(entity).split())
        if name and name.casefold() not in seen:
            seen.add(name.casefold())
            result.append(name)
    return result


def _take_as_owners(row: Memory, data: dict) -> list[str]:
    """The owner confirmed ``row`` on the pages: it takes the owner's confidence
    and source, and ``data`` (its event's) keeps what the proposal had. The
    fields changed (the database lets both change in place)."""
    data["proposed_confidence"], data["proposed_source"] = row.confidence, row.source
    row.confidence, row.source = 1.0, Memory.Source.PAGE
    return ["confidence", "source"]


def _lifetime_change(row: Memory, previous: str, status: str, now: datetime) -> list[str]:
    """Open or close the row's lifetime as an active memory; the fields changed.

    The database trigger (migration 0006) does the same for any other writer;
    set here, the moments match the events and the next version's creation.
    """
    if status == Memory.Status.ACTIVE and previous != Memory.Status.ACTIVE:
        row.active_since, row.active_until = now, None
        return ["active_since", "active_until"]
    if previous == Memory.Status.ACTIVE and status != Memory.Status.ACTIVE:
        row.active_until = now
        return ["active_until"]
    return []


def known_subjects_of(owner_id: int, about: About | None = None) -> KnownSubjects:
    """Whom and what the owner's memories name (``memories.about.KnownSubjects``):
    every version but a redacted one, for a name outlives the fact it came with.

    With ``about`` (a bare name or a bare relation), only what completes it:
    the subjects that hold the name's first word, then those of the relation
    found; or those of the relation. An owner's store may name hundreds of
    people; a write reads the few it needs.
    """
    subjects = (
        Memory.objects.filter(owner_id=owner_id, about_kind__in=(PERSON, PET, ORGANISATION))
        .exclude(status=Memory.Status.REDACTED)
        .order_by()
        .values_list("about_subject", "about_kind")
        .distinct()
    )
    if about is None:
        known = KnownSubjects(subjects)
        _learn_owner_names(known, owner_id)
        return known
    role, name = split_subject(about.subject)
    if role and not name:
        return KnownSubjects(subjects.filter(about_subject__startswith=f"{role} "))
    first = name.split()[0] if name else ""
    if not first:
        return KnownSubjects()
    # The name as a word of the subject ("Akosua", "mother Akosua", "Akosua
    # Mensah"): plain LIKEs over the index, several times cheaper than a regex.
    as_a_word = (
        Q(about_subject=first)
        | Q(about_subject__startswith=f"{first} ")
        | Q(about_subject__endswith=f" {first}")
        | Q(about_subject__contains=f" {first} ")
    )
    known = KnownSubjects(subjects.filter(as_a_word))
    known_role = known.role_of(first)
    if known_role:
        for subject, kind in subjects.filter(about_subject__startswith=f"{known_role} "):
            known.learn(subject, kind)
    elif not known.kind_of(name):
        # A name the store gives nobody else may be the owner's own ("My name is Gerry").
        _learn_owner_names(known, owner_id)
    return known


def _learn_owner_names(known: KnownSubjects, owner_id: int) -> None:
    """The names the owner's memories about their own name give them
    (``memories.about.owner_names_in``): a few rows, read over an index."""
    stated = (
        Memory.objects.filter(owner_id=owner_id, about_subject=SELF, about_aspect__in=NAME_ASPECTS)
        .exclude(status=Memory.Status.REDACTED)
        .order_by("created_at")
        .values_list("content", flat=True)
    )
    for content in stated[:MAX_OWNER_NAME_MEMORIES]:
        known.learn_owner_names(content)


def owner_reading(owner) -> dict:
    """What ``derive_about`` is told of an owner: the names they go by, and
    whom their store names (read only when a memory names someone by half,
    and then only what completes it)."""
    # Read at most once for each subject however many memories are read with it.
    known = cache(partial(known_subjects_of, owner.pk))
    return {"owner_names": owner_names_of(owner), "known": known}


def _found_entities(owner_id: int, content: str) -> list[str]:
    """Entities for a memory written without any (retrieval/entities.py, through
    the hook retrieval sets in memories/signals.py)."""
    return fit_entities(signals.find_entities(owner_id, content))


def _successor_entities(
    old: Memory, content: str | None, entities: Iterable[str] | None
) -> list[str]:
    """A new version's entities: the ones given; else the old ones while the
    text stays the same; else what the new text names."""
    if entities is not None:
        given = normalize_entities(entities)
        if given or content is None:
            return given
    if content is None or content == old.content:
        return normalize_entities(old.entity_refs)
    return _found_entities(old.owner_id, content)


def _successor_about(
    old: Memory, content: str | None, type: str | None, entity_refs: list[str], now: datetime
) -> About:
    """A new version's about when none is given: the old one's while the text and
    type stay the same (an owner's correction included); else derived anew."""
    unchanged = (content is None or content == old.content) and (type in (None, old.type))
    if unchanged and old.about_kind:
        return old.about
    return derive_about(
        old.content if content is None else content,
        type or old.type,
        entities=entity_refs,
        written=now,
        **owner_reading(old.owner),
    )


def _after_write(memory_id: int) -> None:
    """Hand a freshly written memory to the background embedder, if there is one."""
    signals.memory_written.send(sender=Memory, memory_id=memory_id)


def loaded_row(model: type[models.Model], attributes: dict, alias: str) -> models.Model:
    """An instance of ``model`` as if loaded from ``alias`` with these attribute
    values (``attname``s; fields left out are deferred, read on first use).

    Built as unpickling builds one (``__new__``, then the attributes), not
    through ``__init__``, whose per-field descriptors cost ~6–20 µs a row.
    """
    row = model.__new__(model)
    row.__dict__.update(attributes)
    row._state = ModelState()
    row._state.adding = False
    row._state.db = alias
    return row


class MemoryEventQuerySet(models.QuerySet):
    def delete(self):
        raise MemoryIsPermanent()


class MemoryEvent(models.Model):
    """Append-only log of every transition: who, when, why."""

    class Action(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        CREATED = "created", "Created"
        IMPORTED = "imported", "Imported"
        CONFIRMED = "confirmed", "Confirmed"
        RECONFIRMED = "reconfirmed", "Re-confirmed"
        REJECTED = "rejected", "Rejected"
        RESTORED = "restored", "Restored to the queue"
        ARCHIVED = "archived", "Archived"
        UNARCHIVED = "unarchived", "Back from the archive"
        SUPERSEDED = "superseded", "Superseded"
        VERSION = "version", "New version"
        MERGED = "merged", "Merged"
        DECAYED = "decayed", "Confidence decayed"
        REDACTED = "redacted", "Redacted"

    class Via(models.TextChoices):
        """The channel a change came through; the pages say "via <label>"."""

        API = "api", "API"
        PAGE = "page", "these pages"
        ADMIN = "admin", "admin"
        COMMAND = "command", "command line"
        IMPORT = "import", "import"
        EXTRACTION = "extraction", "extraction"
        CONSOLIDATION = "consolidation", "consolidation"
        SYSTEM = "system", "system"

    memory = models.ForeignKey(Memory, models.PROTECT, related_name="events")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.PROTECT, related_name="+")
    action = models.CharField(max_length=16, choices=Action.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.PROTECT, null=True, blank=True, related_name="+"
    )
    via = models.CharField(max_length=16, choices=Via.choices, default=Via.SYSTEM)
    reason = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = MemoryEventQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["owner", "-at"], name="event_owner_at")]

    def __str__(self) -> str:
        return f"{self.action} memory {self.memory_id} at {self.at:%Y-%m-%d %H:%M}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise MemoryIsPermanent()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise MemoryIsPermanent()


# Models of their own modules, imported here so that Django registers them
# (and older imports from memories.models keep working).
from memories.access_log import AccessRecord  # noqa: E402, F401
from memories.api_tokens import TOKEN_PREFIX, ApiToken, ApiTokenQuerySet  # noqa: E402, F401
from memories.disk_erase_records import DiskErase  # noqa: E402, F401
from memories.idempotency_records import IdempotencyRecord  # noqa: E402, F401
