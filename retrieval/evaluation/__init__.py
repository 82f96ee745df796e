"""Retrieval quality on labelled conversations: the engine of ``manage.py evaluate``.

``run_evaluation`` loads a ``timothy-eval/1`` dataset into a throw-away
database, asks every query through the recall entry point and returns every
figure as one JSON-ready dict (see docs/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from retrieval.embeddings import get_provider
from retrieval.evaluation.dataset import Dataset, DatasetError, load_dataset
from retrieval.evaluation.runner import evaluate_dataset, run_specs
from retrieval.evaluation.scratch_database import scratch_database

DEFAULT_KS = (1, 5, 10, 25)

__all__ = ["DEFAULT_KS", "Dataset", "DatasetError", "load_dataset", "run_evaluation"]


def run_evaluation(
    dataset: Dataset,
    *,
    pipeline: str,
    legs: Sequence[str] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    token_budget: int,
    dataset_path: str = "",
    progress: TextIO | None = None,
    profiles: Sequence[str] | None = None,
    entities: str = "dataset",
) -> dict:
    provider = get_provider()
    specs = run_specs(pipeline, legs, profiles)
    with scratch_database():
        runs = evaluate_dataset(
            dataset,
            specs,
            ks=ks,
            token_budget=token_budget,
            provider=provider,
            progress=progress,
            entities=entities,
        )
    return {
        "format": "timothy-eval-report/1",
        "dataset": {
            "name": dataset.name,
            "source": dataset.source,
            "path": dataset_path,
            "memories": dataset.memory_count,
            "queries": dataset.query_count,
            "conversations": [
                {
                    "id": conversation.id,
                    "as_of": conversation.as_of.isoformat(),
                    "memories": len(conversation.memories),
                    "queries": len(conversation.queries),
                }
                for conversation in dataset.conversations
            ],
        },
        "embedding": {
            "provider": provider.name if provider else "none",
            "dimensions": provider.dimensions if provider else None,
        },
        "ks": list(ks),
        "token_budget": token_budget,
        "entities": entities,
        "runs": runs,
    }
