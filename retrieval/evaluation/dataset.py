"""Evaluation datasets in the ``timothy-eval/1`` format (see docs/evaluation.md).

A dataset is a list of conversations; each holds the memories to load and the
queries to ask of them, every query naming the memory ids that answer it.
Loading validates the whole file and reports every problem it finds at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memories.models import MemoryType

FORMAT = "timothy-eval/1"


class DatasetError(Exception):
    """The file is not a usable ``timothy-eval/1`` dataset."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.problems = problems
        listed = "\n".join(f"  - {problem}" for problem in problems[:20])
        more = f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{path} is not a valid {FORMAT} dataset:\n{listed}{more}")


@dataclass(frozen=True)
class EvalMemory:
    id: str
    content: str
    type: str
    entities: list[str]
    created_at: datetime
    last_confirmed_at: datetime


@dataclass(frozen=True)
class EvalQuery:
    query: str
    relevant: list[str]
    category: str


@dataclass(frozen=True)
class Conversation:
    id: str
    as_of: datetime
    memories: list[EvalMemory]
    queries: list[EvalQuery]


@dataclass(frozen=True)
class Dataset:
    name: str
    source: str
    conversations: list[Conversation] = field(default_factory=list)

    @property
    def memory_count(self) -> int:
        return sum(len(conversation.memories) for conversation in self.conversations)

    @property
    def query_count(self) -> int:
        return sum(len(conversation.queries) for conversation in self.conversations)


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a dataset file; raises ``DatasetError`` listing every problem."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise DatasetError(str(path), [f"cannot read the file: {error.strerror or error}"])
    except ValueError as error:
        raise DatasetError(str(path), [f"not JSON: {error}"])
    return parse_dataset(raw, source_name=str(path))


def parse_dataset(raw: Any, *, source_name: str = "dataset") -> Dataset:
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise DatasetError(source_name, ["the top level must be a JSON object"])
    if raw.get("format") != FORMAT:
        problems.append(f"format must be {FORMAT!r}, not {raw.get('format')!r}")
    conversations_raw = raw.get("conversations")
    if not isinstance(conversations_raw, list) or not conversations_raw:
        problems.append("conversations must be a non-empty list")
        conversations_raw = []

    conversations: list[Conversation] = []
    seen_conversations: set[str] = set()
    for index, item in enumerate(conversations_raw):
        where = f"conversations[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        conversation_id = _text(item, "id", where, problems)
        if conversation_id:
            where = f"conversation {conversation_id!r}"
            if conversation_id in seen_conversations:
                problems.append(f"{where} appears twice")
            seen_conversations.add(conversation_id)
        as_of = _timestamp(item, "as_of", where, problems)
        memories = _memories(item.get("memories"), where, problems)
        queries = _queries(item.get("queries"), {m.id for m in memories}, where, problems)
        if as_of is not None:
            conversations.append(
                Conversation(id=conversation_id, as_of=as_of, memories=memories, queries=queries)
            )

    if problems:
        raise DatasetError(source_name, problems)
    return Dataset(
        name=str(raw.get("name") or Path(source_name).stem),
        source=str(raw.get("source") or ""),
        conversations=conversations,
    )


def _memories(raw: Any, where: str, problems: list[str]) -> list[EvalMemory]:
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}: memories must be a non-empty list")
        return []
    memories: list[EvalMemory] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        at = f"{where} memories[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{at} must be an object")
            continue
        memory_id = _text(item, "id", at, problems)
        if memory_id in seen:
            problems.append(f"{at}: id {memory_id!r} appears twice")
        seen.add(memory_id)
        content = _text(item, "content", at, problems)
        memory_type = item.get("type", MemoryType.EPISODIC)
        if memory_type not in MemoryType.values:
            problems.append(f"{at}: type must be one of {', '.join(MemoryType.values)}")
        entities = item.get("entities", [])
        if not isinstance(entities, list) or not all(isinstance(e, str) for e in entities):
            problems.append(f"{at}: entities must be a list of strings")
            entities = []
        created_at = _timestamp(item, "created_at", at, problems)
        confirmed_raw = item.get("last_confirmed_at")
        last_confirmed_at = (
            created_at
            if confirmed_raw is None
            else _timestamp(item, "last_confirmed_at", at, problems)
        )
        if memory_id and content and created_at and last_confirmed_at:
            memories.append(
                EvalMemory(
                    id=memory_id,
                    content=content,
                    type=memory_type,
                    entities=entities,
                    created_at=created_at,
                    last_confirmed_at=last_confirmed_at,
                )
            )
    return memories


def _queries(raw: Any, memory_ids: set[str], where: str, problems: list[str]) -> list[EvalQuery]:
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}: queries must be a non-empty list")
        return []
    queries: list[EvalQuery] = []
    for index, item in enumerate(raw):
        at = f"{where} queries[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{at} must be an object")
            continue
        text = _text(item, "query", at, problems)
        relevant = item.get("relevant")
        if not isinstance(relevant, list) or not relevant:
            # A query without evidence measures nothing: every metric would be 0 or undefined.
            problems.append(f"{at}: relevant must be a non-empty list of memory ids")
            relevant = []
        unknown = [r for r in relevant if r not in memory_ids]
        if unknown:
            problems.append(f"{at}: relevant names unknown memory ids {unknown[:5]}")
        category = item.get("category", "uncategorised")
        if not isinstance(category, str) or not category.strip():
            problems.append(f"{at}: category must be a non-empty string")
            category = "uncategorised"
        if text and relevant and not unknown:
            # Duplicates in the evidence list would count one memory twice.
            queries.append(
                EvalQuery(query=text, relevant=list(dict.fromkeys(relevant)), category=category)
            )
    return queries


def _text(item: dict, key: str, where: str, problems: list[str]) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key} must be a non-empty string")
        return ""
    return value


def _timestamp(item: dict, key: str, where: str, problems: list[str]) -> datetime | None:
    value = item.get(key)
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        problems.append(f"{where}: {key} must be an ISO 8601 timestamp")
        return None
    if parsed.tzinfo is None:
        # Naive times are ambiguous across deployments; the format asks for an offset.
        problems.append(f"{where}: {key} must carry a UTC offset (e.g. +00:00)")
        return None
    return parsed
