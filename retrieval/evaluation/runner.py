"""Load a dataset into the (scratch) database and run its queries through recall.

Each conversation gets its own owner, so no query can see another
conversation's memories; its memories go in with one bulk insert, already
embedded, and every query runs ``as_of`` the conversation's own "now" through
``retrieval.recall.recall``, the entry point the API uses, as a dry run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from itertools import combinations
from typing import TextIO

from django.conf import settings
from django.contrib.auth import get_user_model
from tqdm import tqdm

from memories.about import KnownSubjects, about_fields, refined, with_known_subject
from memories.models import Memory, normalize_entities
from retrieval.constants import LEGS
from retrieval.embeddings import EmbeddingProvider, check_embedding_dimensions
from retrieval.evaluation.dataset import Conversation, Dataset
from retrieval.evaluation.metrics import QueryOutcome, summarize
from retrieval.fusion import NOT_RETRIEVED
from retrieval.recall import recall
from retrieval.results import RecallFailed, RecallResult

LEG_PROBLEMS = ("failed", "timeout")


@dataclass(frozen=True)
class RunSpec:
    """One configuration to measure: a pipeline and, for fusion, the legs it runs."""

    pipeline: str
    # None: the pipeline's own default (every leg).
    legs: tuple[str, ...] | None = None
    # Fusion profile; None: the configured one (TIMOTHY_RETRIEVAL_PROFILE).
    profile: str | None = None

    @property
    def label(self) -> str:
        label = self.pipeline
        if self.profile is not None:
            label += f"/{self.profile}"
        if self.legs is not None:
            label += f" [{'+'.join(self.legs)}]"
        return label


def run_specs(
    pipeline: str, legs: Sequence[str] | None, profiles: Sequence[str] | None = None
) -> list[RunSpec]:
    """The runs a command line asks for.

    With ``legs`` the fusion pipeline runs every non-empty combination of them,
    smallest first (each leg alone, every pair, then all of them), so the
    table shows what each leg adds. With ``profiles`` every fusion run is made
    once per profile.
    """
    pipelines = ("fusion", "freshness") if pipeline == "all" else (pipeline,)
    specs: list[RunSpec] = []
    for name in pipelines:
        if name != "fusion":
            specs.append(RunSpec(name))
            continue
        for profile in profiles or (None,):
            if legs:
                ordered = tuple(leg for leg in LEGS if leg in legs)
                for size in range(1, len(ordered) + 1):
                    specs.extend(
                        RunSpec("fusion", combo, profile) for combo in combinations(ordered, size)
                    )
            else:
                specs.append(RunSpec("fusion", None, profile))
    return specs


@dataclass
class LoadedConversation:
    conversation: Conversation
    owner: object
    # Database id → the dataset's memory id.
    dataset_ids: dict[int, str]


def load_conversation(
    conversation: Conversation,
    provider: EmbeddingProvider | None,
    *,
    progress: TextIO | None = None,
    entities: str = "dataset",
) -> LoadedConversation:
    """Create a scratch owner and bulk-insert the conversation as its active memories.

    ``entities``: "dataset" keeps the dataset's entities, "none" drops them,
    "auto" drops them and lets the store find its own, as it does for a memory
    written without any (memories/entities.py), in the order they were written.
    """
    owner = get_user_model().objects.create(username=f"eval-{conversation.id}"[:150])
    embeddings = embed_contents(
        [memory.content for memory in conversation.memories],
        provider,
        label=conversation.id,
        progress=progress,
    )
    rows = [
        Memory(
            owner=owner,
            type=memory.type,
            content=memory.content,
            status=Memory.Status.ACTIVE,
            entity_refs=normalize_entities(memory.entities) if entities == "dataset" else [],
            embedding=embedding,
            source=Memory.Source.IMPORT,
            session_id=conversation.id,
            metadata={"evaluation_id": memory.id},
            created_at=memory.created_at,
            last_confirmed_at=memory.last_confirmed_at,
        )
        for memory, embedding in zip(conversation.memories, embeddings, strict=True)
    ]
    if entities == "auto":
        _find_entities(owner, rows)
    # Whom the store names so far: a later "Akosua" is "mother Akosua" once an
    # earlier memory has said so, as when the memories were written one by one.
    known = KnownSubjects()
    for row in rows:
        # What each memory is about, as the store derives it: the rules when it
        # is written, the meaning's aspect once it has a vector.
        about = with_known_subject(refined(row.about, row.type, row.embedding, provider), known)
        known.learn_memory(about, row.content)
        for name, value in about_fields(about).items():
            setattr(row, name, value)
    created = Memory.objects.bulk_create(rows, batch_size=500)
    dataset_ids = {
        row.pk: memory.id for row, memory in zip(created, conversation.memories, strict=True)
    }
    return LoadedConversation(conversation=conversation, owner=owner, dataset_ids=dataset_ids)


def _find_entities(owner, rows: list[Memory]) -> None:
    """Each memory's entities as the store finds them at write time: proper
    names, and names the owner's earlier memories already carry."""
    from retrieval.entities import EntityFinder

    finder = EntityFinder(known=())
    for row in sorted(rows, key=lambda row: row.created_at):
        row.entity_refs = finder.find(row.content)
        finder.learn(row.entity_refs)


def embed_contents(
    texts: list[str],
    provider: EmbeddingProvider | None,
    *,
    label: str,
    progress: TextIO | None = None,
) -> list[list[float] | None]:
    """One vector per text with the configured provider (None each without one)."""
    if provider is None:
        return [None] * len(texts)
    check_embedding_dimensions()
    batch = max(1, settings.EMBEDDING_BATCH_SIZE)
    vectors: list[list[float] | None] = []
    # disable=None: no bar when the stream is not a terminal (logs, CI, tests).
    with tqdm(
        total=len(texts),
        desc=f"embedding {label}",
        unit="memory",
        file=progress or sys.stderr,
        disable=None,
    ) as bar:
        for start in range(0, len(texts), batch):
            chunk = texts[start : start + batch]
            vectors.extend(provider.embed(chunk))
            bar.update(len(chunk))
    return vectors


def ranked_candidates(result: RecallResult) -> list[int]:
    """Every candidate the pipeline ranks above its minimum score, best first.

    This is the ranking before packing: what made the block plus what the
    packer left out (past where the scores fall off, or over the budget), so
    the block's cut changes no R@k. Candidates under the minimum or relative
    score are not retrieved at all, so they do not count.
    """
    candidates = list(result.memories) + [
        item for item in result.cut if item.cut_reason not in NOT_RETRIEVED
    ]
    # Stable: on a tie, a packed memory stays ahead of one the packer left out.
    candidates.sort(key=lambda item: item.score, reverse=True)
    return [item.memory.pk for item in candidates]


def run_queries(
    loaded: LoadedConversation,
    spec: RunSpec,
    *,
    token_budget: int,
    progress: TextIO | None = None,
) -> list[QueryOutcome]:
    conversation = loaded.conversation
    outcomes: list[QueryOutcome] = []
    for query in tqdm(
        conversation.queries,
        desc=f"{spec.label} {conversation.id}",
        unit="query",
        file=progress or sys.stderr,
        disable=None,
    ):
        started = time.perf_counter()
        try:
            result = recall(
                loaded.owner,
                query.query,
                pipeline=spec.pipeline,
                token_budget=token_budget,
                as_of=conversation.as_of,
                legs=spec.legs,
                dry_run=True,
                explain=True,
                profile=spec.profile,
            )
        except RecallFailed as failure:
            elapsed = (time.perf_counter() - started) * 1000
            failed = tuple(failure.legs) or ("all",)
            outcomes.append(
                QueryOutcome(
                    conversation=conversation.id,
                    category=query.category,
                    query=query.query,
                    relevant=query.relevant,
                    ranked=[],
                    packed_ids=[],
                    block_tokens=0,
                    packed=0,
                    ms=elapsed,
                    failed_legs=failed,
                )
            )
            continue
        elapsed = (time.perf_counter() - started) * 1000
        outcomes.append(
            QueryOutcome(
                conversation=conversation.id,
                category=query.category,
                query=query.query,
                relevant=query.relevant,
                ranked=[loaded.dataset_ids[pk] for pk in ranked_candidates(result)],
                packed_ids=[loaded.dataset_ids[item.memory.pk] for item in result.memories],
                block_tokens=result.block_tokens,
                packed=len(result.memories),
                ms=elapsed,
                failed_legs=tuple(
                    name for name, leg in result.legs.items() if leg.status in LEG_PROBLEMS
                ),
            )
        )
    return outcomes


def evaluate_dataset(
    dataset: Dataset,
    specs: Sequence[RunSpec],
    *,
    ks: Sequence[int],
    token_budget: int,
    provider: EmbeddingProvider | None,
    progress: TextIO | None = None,
    entities: str = "dataset",
) -> list[dict]:
    """Load every conversation, run every spec over every query; one summary per spec.

    Must run inside ``scratch_database()``: it writes owners and memories.
    """
    loaded = [
        load_conversation(conversation, provider, progress=progress, entities=entities)
        for conversation in dataset.conversations
    ]
    runs: list[dict] = []
    for spec in specs:
        warm_up(loaded[0], spec, token_budget=token_budget)
        outcomes: list[QueryOutcome] = []
        for conversation in loaded:
            outcomes.extend(
                run_queries(conversation, spec, token_budget=token_budget, progress=progress)
            )
        runs.append(
            {
                "label": spec.label,
                "pipeline": spec.pipeline,
                "legs": list(spec.legs) if spec.legs else None,
                "profile": spec.profile,
                **summarize(outcomes, ks),
                "per_query": [query_record(outcome) for outcome in outcomes],
            }
        )
    return runs


def warm_up(loaded: LoadedConversation, spec: RunSpec, *, token_budget: int) -> None:
    """One untimed recall first, so that latency figures leave out one-off start-up
    costs (the leg threads' connections, the embedding model's first call)."""
    conversation = loaded.conversation
    # A failure here is recorded by the measured run.
    with suppress(RecallFailed):
        recall(
            loaded.owner,
            conversation.queries[0].query,
            pipeline=spec.pipeline,
            token_budget=token_budget,
            as_of=conversation.as_of,
            legs=spec.legs,
            dry_run=True,
            profile=spec.profile,
        )


def query_record(outcome: QueryOutcome) -> dict:
    """One query's result for the JSON report: where each evidence item ranked."""
    positions = {memory_id: index for index, memory_id in enumerate(outcome.ranked, start=1)}
    return {
        "conversation": outcome.conversation,
        "category": outcome.category,
        "query": outcome.query,
        "relevant": outcome.relevant,
        # 1-based rank of each evidence item, None when not ranked.
        "ranks": {memory_id: positions.get(memory_id) for memory_id in outcome.relevant},
        "candidates": len(outcome.ranked),
        "block_tokens": outcome.block_tokens,
        "packed": outcome.packed,
        "packed_relevant": len(set(outcome.packed_ids) & set(outcome.relevant)),
        "ms": round(outcome.ms, 2),
        "failed_legs": list(outcome.failed_legs),
    }
