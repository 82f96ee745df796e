"""Time the related-memory search on a scratch database of synthetic memories.

Fills one owner with ``--memories`` active memories (templated sentences,
entities, random unit vectors) and ``--proposals`` proposals, then times
``find_related`` for one text with its vector given (what a create costs
besides embedding the text) and ``related_for_memories`` for a queue page of
proposals, and prints the median and 95th percentile of each. The scratch
database is dropped afterwards.
"""

from __future__ import annotations

import random
import statistics
import time

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from memories.models import Memory
from memories.related import find_related, related_for_memories
from retrieval.evaluation.scratch_database import scratch_database

SUBJECTS = ["seat", "coffee", "tea", "address", "phone", "car", "dentist", "gym", "train", "dog"]
VALUES = ["aisle", "window", "black", "oat milk", "Lisbon", "Porto", "Volvo", "Tesla", "early"]
NAMES = ["Leila", "Tom", "Maya", "Jonas", "Priya", "Sam", "Ana", "Miso", "Biscuit", "Alex"]
TEMPLATES = [
    "Prefers the {v} {s} when travelling with {n}.",
    "His {s} is {v}, according to {n}.",
    "Talked with {n} about the {s} and chose {v}.",
    "Wants a new {s}: {v} this time, says {n}.",
]
BATCH = 2000


class Command(BaseCommand):
    help = "Time the related-memory search (create and queue page) on synthetic memories."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--memories", type=int, default=10_000)
        parser.add_argument("--proposals", type=int, default=50)
        parser.add_argument("--runs", type=int, default=30)
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, **options) -> None:
        rng = random.Random(options["seed"])
        vectors = np.random.default_rng(options["seed"])
        dimensions = settings.EMBEDDING_DIMENSIONS
        with scratch_database():
            owner = get_user_model().objects.create_user("bench-related")
            started = time.monotonic()
            for start in range(0, options["memories"], BATCH):
                size = min(BATCH, options["memories"] - start)
                Memory.objects.bulk_create(
                    self._memory(owner, rng, vectors, dimensions, Memory.Status.ACTIVE)
                    for _ in range(size)
                )
            proposals = Memory.objects.bulk_create(
                self._memory(owner, rng, vectors, dimensions, Memory.Status.PROPOSED)
                for _ in range(options["proposals"])
            )
            self.stdout.write(
                f"{options['memories']} active memories and {len(proposals)} proposals of one "
                f"owner loaded in {time.monotonic() - started:.1f} s"
            )
            create = []
            for _ in range(options["runs"]):
                probe = self._memory(owner, rng, vectors, dimensions, Memory.Status.PROPOSED)
                began = time.perf_counter()
                find_related(
                    owner, probe.content, entities=probe.entity_refs, embedding=probe.embedding
                )
                create.append((time.perf_counter() - began) * 1000)
            page = []
            for _ in range(max(3, options["runs"] // 5)):
                began = time.perf_counter()
                related_for_memories(owner, proposals)
                page.append((time.perf_counter() - began) * 1000)
            self._report("one text (a create, vector given)", create)
            self._report(f"a queue page of {len(proposals)} proposals", page)

    def _memory(self, owner, rng, vectors, dimensions: int, status: str) -> Memory:
        name = rng.choice(NAMES)
        vector = vectors.standard_normal(dimensions)
        return Memory(
            owner=owner,
            type=Memory.Type.PREFERENCE,
            status=status,
            content=rng.choice(TEMPLATES).format(
                s=rng.choice(SUBJECTS), v=rng.choice(VALUES), n=name
            ),
            entity_refs=[name],
            embedding=(vector / np.linalg.norm(vector)).tolist(),
        )

    def _report(self, what: str, times: list[float]) -> None:
        ordered = sorted(times)
        p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
        self.stdout.write(
            f"{what}: median {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms "
            f"({len(ordered)} runs)"
        )
