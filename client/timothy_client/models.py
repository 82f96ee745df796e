"""What the API answers, as small typed objects (the raw JSON stays on ``.raw``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from timothy_client.errors import MalformedAnswer

MEMORY_TYPES = ("semantic", "preference", "episodic", "reflection")
STATUSES = ("proposed", "active", "rejected", "superseded", "archived")
# Every block the service renders opens and closes with these; a block that
# does not is not injected (it could carry instructions, not data).
FENCE_OPEN_TAG = '<memory source="timothy-memory" trust="data">'
FENCE_CLOSE_TAG = "</memory>"


def _timestamp(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class MemoryEvent:
    """One entry of a memory's history: who did what, when, through what, why."""

    action: str
    at: datetime | None
    actor: str | None
    via: str
    reason: str
    data: dict[str, Any]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> MemoryEvent:
        return cls(
            action=raw["action"],
            at=_timestamp(raw.get("at")),
            actor=raw.get("actor"),
            via=raw.get("via") or "",
            reason=raw.get("reason") or "",
            data=raw.get("data") or {},
        )


@dataclass(frozen=True)
class Related:
    """A memory a new one repeats (``duplicate``), may update (``update``), or sits
    beside (``see_also``), from a create answer's ``related``: an active memory,
    or (``status`` proposed) another copy waiting in the owner's queue.

    A relation this client does not know is kept as it came and only named.
    """

    id: int
    relation: str
    score: float
    content: str = ""
    status: str = "active"

    @classmethod
    def from_json(cls, raw: Any) -> Related:
        return cls(
            id=int(raw["id"]),
            relation=str(raw["relation"]),
            score=float(raw.get("score") or 0.0),
            content=str(raw.get("content") or ""),
            status=str(raw.get("status") or "active"),
        )

    def note(self, memory: MemoryRecord) -> str:
        """What it means for ``memory`` (the one just written), in words a model acts on."""
        quoted = f": {json.dumps(self.content, ensure_ascii=False)}" if self.content else ""
        proposed = memory.status == "proposed"
        if self.status == "proposed" and self.relation == "duplicate" and proposed:
            return (
                f"This repeats #{self.id}{quoted}, which also waits for the user — one "
                f"decision settles both: confirm (or reject) #{memory.id} with "
                f"copies=[{self.id}]."
            )
        if self.relation == "duplicate":
            head = f"This repeats #{self.id}{quoted}"
            advice = (
                f"nothing new to confirm: reject #{memory.id}, or confirm it with "
                f"replaces={self.id} to keep the new wording"
                if proposed
                else "it was saved as that memory's new version, so one copy is kept"
            )
        elif self.relation == "update":
            head = f"This may update #{self.id}{quoted}"
            advice = (
                f"if the user agrees it replaces it, confirm #{memory.id} with "
                f"replaces={self.id} to make it the new version (a plain confirm keeps both "
                "active)"
                if proposed
                else f"both are active now: if the new fact replaces it, archive #{self.id} "
                "(ask the user if unsure)"
            )
        elif self.relation == "see_also":
            return f"See also #{self.id}{quoted}"
        else:
            return f"Related to #{self.id} ({self.relation}){quoted}"
        return f"{head} — {advice}."


@dataclass(frozen=True)
class MemoryRecord:
    """One memory as the API shows it.

    ``score`` and ``position`` are set on the memories of a recall (the fused
    score, and the place in the packed block); ``events`` on a chain's versions;
    ``related`` on a memory just created (what it repeats or may update), and
    ``notes`` says what each means, in words to hand to the model.
    """

    id: int
    type: str
    content: str
    status: str
    entities: list[str]
    confidence: float
    source: str
    session_id: str | None
    created_at: datetime | None
    last_confirmed_at: datetime | None
    last_retrieved_at: datetime | None
    superseded_by: int | None
    score: float | None = None
    position: int | None = None
    events: list[MemoryEvent] = field(default_factory=list)
    related: list[Related] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def notes(self) -> list[str]:
        """One sentence per related memory: what it repeats or updates, and what to do."""
        return [item.note(self) for item in self.related]

    @classmethod
    def from_json(cls, raw: Any) -> MemoryRecord:
        try:
            return cls(
                id=int(raw["id"]),
                type=str(raw["type"]),
                content=str(raw["content"]),
                status=str(raw["status"]),
                entities=list(raw.get("entities") or []),
                confidence=float(raw.get("confidence", 0.0)),
                source=str(raw.get("source") or ""),
                session_id=raw.get("session_id"),
                created_at=_timestamp(raw.get("created_at")),
                last_confirmed_at=_timestamp(raw.get("last_confirmed_at")),
                last_retrieved_at=_timestamp(raw.get("last_retrieved_at")),
                superseded_by=raw.get("superseded_by"),
                score=raw.get("score"),
                position=raw.get("position"),
                events=[MemoryEvent.from_json(event) for event in raw.get("events") or []],
                related=[Related.from_json(item) for item in raw.get("related") or []],
                raw=raw,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise MalformedAnswer(f"Not a memory: {error!r} in {str(raw)[:200]}") from error


@dataclass(frozen=True)
class Chain:
    """Every version of a memory, oldest first, and the id of the one in force."""

    head_id: int
    versions: list[MemoryRecord]

    @property
    def head(self) -> MemoryRecord:
        return next(version for version in self.versions if version.id == self.head_id)

    @classmethod
    def from_json(cls, raw: Any) -> Chain:
        try:
            return cls(
                head_id=int(raw["head_id"]),
                versions=[MemoryRecord.from_json(item) for item in raw["memories"]],
            )
        except (KeyError, TypeError, ValueError) as error:
            raise MalformedAnswer(f"Not a chain: {error!r}") from error


@dataclass(frozen=True)
class Recall:
    """What a recall found: the fenced block to inject, the memories in it, its tokens.

    An empty recall (``block == ""``) is a normal answer (nothing relevant),
    or the service could not answer in time; then ``error`` says why.
    """

    block: str = ""
    memories: list[MemoryRecord] = field(default_factory=list)
    tokens: int = 0
    pipeline: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the service answered (even with nothing found)."""
        return self.error is None

    def __bool__(self) -> bool:
        return bool(self.block)

    @classmethod
    def failed(cls, reason: str) -> Recall:
        return cls(error=reason)

    @classmethod
    def from_json(cls, raw: Any) -> Recall:
        """Check the search answer's shape; raises ``MalformedAnswer`` if it is not one."""
        if not isinstance(raw, dict):
            raise MalformedAnswer("The search answer is not a JSON object.")
        block, tokens, memories = raw.get("block"), raw.get("block_tokens"), raw.get("memories")
        if not isinstance(block, str) or not isinstance(memories, list):
            raise MalformedAnswer("The search answer has no block or no list of memories.")
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise MalformedAnswer("The search answer has no block_tokens.")
        if block and not (
            block.startswith(FENCE_OPEN_TAG) and block.rstrip().endswith(FENCE_CLOSE_TAG)
        ):
            raise MalformedAnswer("The block is not a Timothy memory fence; it is not injected.")
        return cls(
            block=block,
            memories=[MemoryRecord.from_json(item) for item in memories],
            tokens=tokens,
            pipeline=raw.get("pipeline"),
        )
