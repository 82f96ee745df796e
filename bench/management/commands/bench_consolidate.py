"""Benchmark consolidation on a scratch database with planted near-duplicates.

Creates a separate database on the same server (never the service's own),
migrates it, bulk-loads one owner's active memories with clustered synthetic
embeddings (topics and subtopics) plus a share of planted near-duplicates (cosine 0.97-0.99 to their
original), builds the indexes, then times the real consolidation: the
near-duplicate search through the HNSW index, then the merges. It checks that
every planted group was merged exactly, and that nothing else was, prints the
figures, and drops the database unless ``--keep`` is given.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone
from tqdm import tqdm

from memories import consolidation
from memories.models import Memory
from retrieval.evaluation.scratch_database import ScratchRefused, scratch_database
from timothy.scratch import drop_secondary_indexes

BENCH_OWNER = "bench-consolidation-owner"
# Default data ("latent"): like real sentence embeddings, the vectors lie near a
# space of few dimensions (a mixture of topics in 24 latent dimensions, mapped
# into the embedding space) plus a share of noise in every direction. Unrelated
# memories sit near cosine 0, a memory's nearest unplanted neighbour near 0.77,
# the closest unplanted pair near 0.84: far below the near-duplicate threshold.
LATENT_DIMENSIONS = 24
LATENT_TOPICS = 300
LATENT_SPREAD = 0.6
NOISE_SHARE = 0.15
# Stress data ("sharp"): orthogonal topics, 50 subtopics each, memories at a
# fixed cosine to their subtopic with noise in every other direction, so all
# memories of a subtopic are equidistant; graph indexes lose their way here.
TOPICS = 100
SUBTOPICS_PER_TOPIC = 50
SUBTOPIC_COSINE = 0.7  # subtopic centre to its topic centre
MEMORY_COSINE = 0.8  # memory to its subtopic centre
# Planted duplicates sit this close (cosine) to their original.
DUPLICATE_COSINE = (0.97, 0.99)
# Share of planted groups with two duplicates rather than one.
TRIPLE_SHARE = 0.25
COPY_BATCH = 10_000
TYPES = ("semantic", "preference", "episodic", "reflection")


class Command(BaseCommand):
    help = "Time consolidation of N active memories with planted near-duplicates."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=100_000, help="active memories")
        parser.add_argument(
            "--duplicate-share",
            type=float,
            default=0.05,
            help="share of the memories that are planted near-duplicates (default 0.05)",
        )
        parser.add_argument("--runs", type=int, default=1, help="fresh database per run")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--data",
            choices=("latent", "sharp"),
            default="latent",
            help="latent: like real embeddings (default); sharp: a stress case for the index",
        )
        parser.add_argument("--database", default="timothy_bench_consolidate")
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument(
            "--ef-search",
            type=int,
            default=consolidation.HNSW_EF_SEARCH,
            help=f"HNSW candidate list of the probes (default {consolidation.HNSW_EF_SEARCH})",
        )

    def handle(self, *args, **options) -> None:
        database = options["database"]
        results = []
        for run in range(options["runs"]):
            keep = options["keep"] and run == options["runs"] - 1
            try:
                with scratch_database(database, keep=keep):
                    planted = self._fill(
                        options["memories"],
                        options["duplicate_share"],
                        options["seed"] + run,
                        options["data"],
                    )
                    results.append(self._consolidate(planted, options["ef_search"]))
            except ScratchRefused as refused:
                raise CommandError(str(refused))
        if len(results) > 1:
            self.stdout.write(
                f"median over {len(results)} runs: search "
                f"{statistics.median(r['search'] for r in results):.1f} s, merge "
                f"{statistics.median(r['merge'] for r in results):.1f} s, total "
                f"{statistics.median(r['total'] for r in results):.1f} s"
            )
        failed = sum(not r["complete"] for r in results)
        if failed:
            raise CommandError(
                f"{failed} of {len(results)} runs did not merge every planted group exactly."
            )

    # --- data -----------------------------------------------------------------------

    def _vectors(self, memories: int, share: float, seed: int, data: str = "latent"):
        """Base vectors, then planted groups appended at the end.

        Returns the vectors and, for each planted group, the row positions of its members.
        """
        rng = np.random.default_rng(seed)
        dimensions = settings.EMBEDDING_DIMENSIONS
        duplicates = round(memories * share)
        triples = round(duplicates * TRIPLE_SHARE / 2)
        pairs = duplicates - 2 * triples
        groups = pairs + triples
        originals = memories - duplicates
        if data == "sharp":
            topics = _unit(rng.standard_normal((TOPICS, dimensions)))
            subtopics = _around(
                rng, np.repeat(topics, SUBTOPICS_PER_TOPIC, axis=0), SUBTOPIC_COSINE
            )
            base = _around(
                rng, subtopics[rng.integers(0, len(subtopics), originals)], MEMORY_COSINE
            )
        else:
            basis, _ = np.linalg.qr(rng.standard_normal((dimensions, LATENT_DIMENSIONS)))
            centres = rng.standard_normal((LATENT_TOPICS, LATENT_DIMENSIONS))
            latent = centres[rng.integers(0, LATENT_TOPICS, originals)]
            latent += rng.standard_normal(latent.shape) * LATENT_SPREAD
            base = _around(rng, _unit(latent @ basis.T), np.sqrt(1 - NOISE_SHARE))
        chosen = rng.choice(originals, size=groups, replace=False)
        extra, members, position = [], [], originals
        for index, source in enumerate(chosen):
            copies = 2 if index < triples else 1
            group = [int(source)]
            for _ in range(copies):
                cosine = rng.uniform(*DUPLICATE_COSINE)
                extra.append(_around(rng, base[source][None, :], cosine)[0])
                group.append(position)
                position += 1
            members.append(group)
        return np.vstack([base, np.array(extra)]).astype(np.float32), members

    def _fill(self, memories: int, share: float, seed: int, data: str) -> list[list[int]]:
        owner = get_user_model().objects.create(username=BENCH_OWNER, password="!")
        vectors, groups = self._vectors(memories, share, seed, data)
        marker = {}
        for index, group in enumerate(groups):
            for position in group:
                marker[position] = f"planted-{index}"
        table = Memory._meta.db_table
        with connection.cursor() as cursor:
            indexes = drop_secondary_indexes(cursor, table)
        from pgvector.psycopg import register_vector

        connection.ensure_connection()
        raw = connection.connection
        register_vector(raw)
        now = timezone.now()
        rng = np.random.default_rng(seed + 1000)
        ages = rng.integers(0, 90 * 86400, size=len(vectors))
        started = time.perf_counter()
        with tqdm(total=len(vectors), unit="rows", desc="COPY memories") as bar:
            for start in range(0, len(vectors), COPY_BATCH):
                with (
                    raw.cursor() as cursor,
                    cursor.copy(
                        f"COPY {table} (owner_id, type, content, status, entity_refs, embedding, "
                        "confidence, source, session_id, metadata, created_at, last_confirmed_at) "
                        "FROM STDIN"
                    ) as copy,
                ):
                    for position in range(start, min(start + COPY_BATCH, len(vectors))):
                        created = now - timedelta(seconds=int(ages[position]))
                        copy.write_row(
                            (
                                owner.pk,
                                TYPES[position % len(TYPES)],
                                f"Synthetic memory number {position}.",
                                "active",
                                [],
                                vectors[position],
                                0.5 + (position % 5) / 10,
                                "import",
                                marker.get(position, ""),
                                "{}",
                                created,
                                created,
                            )
                        )
                bar.update(min(COPY_BATCH, len(vectors) - start))
        copy_seconds = time.perf_counter() - started
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '2GB'")
            for _, definition in tqdm(indexes, desc="indexes", unit="index"):
                cursor.execute(definition)
            cursor.execute(f"VACUUM ANALYZE {table}")
        index_seconds = time.perf_counter() - started
        planted_rows = sum(len(group) for group in groups)
        self.stdout.write(
            f"loaded {len(vectors):,} active {vectors.shape[1]}-d memories "
            f"({len(vectors) - len(groups) - (planted_rows - 2 * len(groups)) - len(groups):,} "
            f"unique, {len(groups):,} planted groups holding {planted_rows:,} rows) in "
            f"{copy_seconds:.1f} s; built {len(indexes)} indexes in {index_seconds:.1f} s"
        )
        return groups

    # --- the measured part ----------------------------------------------------------

    def _consolidate(self, groups: list[list[int]], ef_search: int) -> dict[str, float]:
        total = Memory.objects.active().count()
        started = time.perf_counter()
        with tqdm(total=total, unit="memories", desc="near-duplicate search") as bar:
            plan = consolidation.plan(progress=bar.update, ef_search=ef_search)
        search = time.perf_counter() - started
        started = time.perf_counter()
        with tqdm(total=len(plan.merges), unit="groups", desc="merges") as bar:
            outcome = consolidation.apply(plan, use_llm=False, progress=bar.update)
        merge = time.perf_counter() - started
        found, exact, wrong = self._verify(len(groups))
        self.stdout.write(
            f"index probes: {plan.search.probed:,}; lost (did not find themselves) and "
            f"retried with ef_search {consolidation.HNSW_EF_SEARCH_RETRY}: "
            f"{plan.search.retried:,}; still lost, compared exactly: "
            f"{plan.search.compared_exactly:,}"
        )
        self.stdout.write(
            f"consolidated {total:,} memories in {search + merge:.1f} s "
            f"(near-duplicate search {search:.1f} s, {len(plan.merges):,} merges {merge:.1f} s); "
            f"{outcome.summary()}"
        )
        self.stdout.write(
            f"planted groups: {found:,}/{len(groups):,} merged, {exact:,} exactly; "
            f"merges outside planted groups: {wrong}"
        )
        complete = found == exact == len(groups) and not wrong
        return {"search": search, "merge": merge, "total": search + merge, "complete": complete}

    def _verify(self, planted: int) -> tuple[int, int, int]:
        """Planted groups merged, merged exactly (no more, no fewer), and wrong merges."""
        rows = Memory.objects.values_list("pk", "session_id", "superseded_by_id")
        groups: dict[str, set[int]] = {}
        merged_into: dict[int, set[int]] = {}
        successor: dict[int, int | None] = {}
        for pk, marker, superseded_by in rows.iterator(chunk_size=20_000):
            successor[pk] = superseded_by
            if marker:
                groups.setdefault(marker, set()).add(pk)
            if superseded_by is not None:
                merged_into.setdefault(superseded_by, set()).add(pk)
        found = exact = 0
        for members in groups.values():
            heads = {successor[pk] for pk in members}
            if len(heads) == 1 and None not in heads:
                found += 1
                exact += merged_into[heads.pop()] == members
        planted_sets = [frozenset(members) for members in groups.values()]
        wrong = len({frozenset(m) for m in merged_into.values()} - set(planted_sets))
        return found, exact, wrong


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _around(rng: np.random.Generator, anchors: np.ndarray, cosine: float) -> np.ndarray:
    """Unit vectors at exactly ``cosine`` to each (unit) anchor, in a random direction."""
    noise = rng.standard_normal(anchors.shape)
    noise -= (noise * anchors).sum(axis=1, keepdims=True) * anchors
    noise = _unit(noise)
    return cosine * anchors + np.sqrt(1 - cosine * cosine) * noise
