"""Benchmark recall on a scratch database filled with synthetic memories.

Creates a separate database on the same server (never the service's own),
migrates it, bulk-loads realistic synthetic memories with COPY, runs recall
for random owners with precomputed query embeddings, prints latency
percentiles of the whole call and of each leg, and drops the database unless
``--keep`` is given.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb
from tqdm import tqdm

from bench.measure import (
    ABOUT_COLUMNS,
    FILL_COLUMNS,
    FILL_TYPES,
    describe_load,
    load_average,
    percentile,
)
from memories.about import about_fields, derive_about, owner_names_of
from memories.management.base import non_negative_int, positive_int
from memories.models import Memory
from retrieval import index as retrieval_index
from retrieval import legs
from retrieval.constants import PIPELINES
from retrieval.evaluation.scratch_database import ScratchRefused, scratch_database
from retrieval.index import build_settings
from retrieval.recall import drain_stamps, recall
from timothy.scratch import database_exists, drop_secondary_indexes

BENCH_OWNER_PREFIX = "bench-owner-"
BATCH_ROWS = 20_000
TOPICS = 64
# How far a memory's embedding strays from its topic's centre (and a query's).
MEMORY_NOISE = 0.35
QUERY_NOISE = 0.25
# Share of an owner's memories in each status.
STATUSES = (("active", 0.9), ("archived", 0.05), ("proposed", 0.05))
TYPES = (("semantic", 0.45), ("preference", 0.2), ("episodic", 0.3), ("reflection", 0.05))
WARMUP_QUERIES = 20
# Parts of recall()'s time printed after the legs: the legs' wall clock (they
# run at once), fusion (loading the candidates and scoring them), packing.
SPLIT_PARTS = ("legs", "fuse", "pack")
DEFAULT_SEED = 7
# The topics' centres come from this seed whatever --seed says (the default
# seed's own, so its fills and queries are unchanged).
CENTRES_SEED = DEFAULT_SEED
# Share of queries about a topic the owner has memories on.
OWN_TOPIC_SHARE = 0.8

FIRST_NAMES = [
    "Ann",
    "Ben",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Lena",
    "Marco",
    "Nadia",
    "Omar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tamar",
    "Uma",
    "Victor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Aiko",
    "Bruno",
    "Carmen",
    "Diego",
    "Esther",
    "Felix",
    "Gita",
    "Hugo",
    "Ivana",
    "Jamal",
    "Kira",
    "Luis",
    "Mira",
    "Nils",
    "Olga",
    "Pablo",
    "Rania",
    "Sami",
    "Tess",
    "Ulla",
    "Vera",
    "Wilhelm",
    "Yara",
    "Zack",
]
LAST_NAMES = [
    "Smith",
    "Okafor",
    "Nguyen",
    "Garcia",
    "Müller",
    "Rossi",
    "Kowalski",
    "Tanaka",
    "Haddad",
    "Silva",
    "Novak",
    "Jensen",
    "Ivanova",
    "Dubois",
    "Costa",
    "Moreau",
    "Brown",
    "Lindqvist",
    "Petrov",
    "Kaya",
    "Singh",
    "Cohen",
    "Mendes",
    "Fischer",
    "Horvat",
]
PLACES = [
    "Paris",
    "Lisbon",
    "Tokyo",
    "Nairobi",
    "Berlin",
    "Oslo",
    "Lima",
    "Seoul",
    "Cairo",
    "Denver",
    "Quebec",
    "Porto",
    "Kyoto",
    "Vienna",
    "Dublin",
    "Austin",
    "Prague",
    "Hanoi",
    "Sydney",
    "Zurich",
    "Madrid",
    "Boston",
    "Warsaw",
    "Accra",
    "Bergen",
    "Florence",
]
TOPIC_WORDS = [
    words.split()
    for words in (
        "flight seat aisle window airline layover passport luggage boarding lounge",
        "coffee espresso latte beans grinder roast barista mug cafe brew",
        "running marathon training pace shoes trail race stretch sprint hill",
        "piano lesson scales chord sheet music recital teacher practice tempo",
        "garden tomato basil compost seeds soil watering harvest greenhouse pruning",
        "python code review deploy database migration query index server bug",
        "birthday party cake candles gift surprise invitation balloon dinner toast",
        "doctor appointment allergy prescription dentist checkup vaccine clinic pharmacy",
        "budget savings mortgage invoice taxes salary pension account loan expense",
        "novel chapter author library poetry bookshop reading series fiction essay",
        "cooking recipe pasta curry oven spice knife bake vegetarian sauce",
        "football match stadium season goal coach league tickets derby referee",
        "hiking mountain tent campfire summit backpack map ridge valley cabin",
        "movie cinema director sequel trailer documentary actor screenplay festival premiere",
        "kids school homework teacher playground lunchbox pickup recital uniform grades",
        "car repair tyres engine mechanic insurance garage battery brakes mileage",
    )
]
TEMPLATES = (
    "{first} prefers {w0} and {w1} when in {place}.",
    "Talked with {first} {last} about the {w0} and the {w1}.",
    "Booked {w0} for {place} next {day}; {first} will bring the {w1}.",
    "Remember that the {w0} in {place} needs a new {w1} before {day}.",
    "{first} {last} recommended a {w0} near {place} for {w2}.",
    "Felt the {w0} went well, but the {w1} and {w2} need more attention.",
    "Always asks for {w0} without {w1}; {first} knows this.",
    "On {day} at {place}: {w0}, {w1}, then {w2} with {first}.",
)
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
QUERY_TEMPLATES = (
    "What do I usually prefer for {w0} and {w1}?",
    "When is the {w0} with {first}?",
    "Anything about {w0} in {place}?",
    "What did {first} {last} say about {w1}?",
    "Remind me about my {w0}",
)


class Synthesizer:
    """Clustered memories: a topic decides the words and the embedding's neighbourhood.

    ``seed`` varies the memories and the queries, never the topics' centres: a
    ``--reuse`` run with a seed other than its fill's asks about the same topics
    the memories are about (the centres once came from the seed, so such a run
    put its queries around centres no memory was near).
    """

    def __init__(self, seed: int, dimensions: int) -> None:
        self.random = random.Random(seed)
        self.numbers = np.random.default_rng(seed)
        shape = (TOPICS, dimensions)
        centres = np.random.default_rng(CENTRES_SEED).standard_normal(shape).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        # Each seed's stream goes on as if it had drawn the centres itself: the
        # default seed's fills and queries are exactly what they were, another
        # seed's keep their jitter, around these centres.
        self.numbers.standard_normal(shape)
        self.dimensions = dimensions

    def embeddings(self, topics: np.ndarray, noise: float) -> np.ndarray:
        jitter = self.numbers.standard_normal((len(topics), self.dimensions)).astype(np.float32)
        vectors = self.centres[topics] + noise * jitter / np.sqrt(self.dimensions) * 4
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def slots(self, topic: int) -> dict[str, str]:
        words = TOPIC_WORDS[topic % len(TOPIC_WORDS)]
        # Half the words come from the topic, the rest from anywhere: realistic overlap.
        picks = [
            self.random.choice(
                words if self.random.random() < 0.7 else self.random.choice(TOPIC_WORDS)
            )
            for _ in range(3)
        ]
        return {
            "first": self.random.choice(FIRST_NAMES),
            "last": self.random.choice(LAST_NAMES),
            "place": self.random.choice(PLACES),
            "day": self.random.choice(DAYS),
            "w0": picks[0],
            "w1": picks[1],
            "w2": picks[2],
        }

    def memory_text(self, topic: int) -> tuple[str, list[str]]:
        slots = self.slots(topic)
        text = self.random.choice(TEMPLATES).format(**slots)
        entities = []
        if "{first}" in text or slots["first"] in text:
            entities.append(
                f"{slots['first']} {slots['last']}" if slots["last"] in text else slots["first"]
            )
        if slots["place"] in text:
            entities.append(slots["place"])
        return text, entities

    def query_text(self, topic: int) -> str:
        return self.random.choice(QUERY_TEMPLATES).format(**self.slots(topic))

    def weighted(self, choices: tuple[tuple[str, float], ...], count: int) -> list[str]:
        names = [name for name, _ in choices]
        weights = [weight for _, weight in choices]
        return self.random.choices(names, weights=weights, k=count)


class Command(BaseCommand):
    help = "Fill a scratch database with synthetic memories and measure recall latency."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--memories", type=positive_int, default=10_000, help="memories per owner"
        )
        parser.add_argument("--owners", type=positive_int, default=1)
        parser.add_argument("--queries", type=positive_int, default=200, help="timed recalls")
        parser.add_argument(
            "--warmup",
            type=non_negative_int,
            default=WARMUP_QUERIES,
            help=f"untimed recalls first (default {WARMUP_QUERIES}); more bring a large "
            "database's pages into memory after a restart or other work",
        )
        parser.add_argument("--pipeline", choices=PIPELINES, default="fusion")
        parser.add_argument("--budget", type=int, default=None, help="token budget per recall")
        parser.add_argument("--database", default="timothy_bench", help="scratch database name")
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument(
            "--reuse", action="store_true", help="reuse a kept scratch database: skip the fill"
        )
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
        parser.add_argument(
            "--exact-scan-max",
            type=int,
            default=None,
            help="override VECTOR_EXACT_SCAN_MAX_ROWS for this run (to compare strategies)",
        )

    def handle(self, *args, **options) -> None:
        database = options["database"]
        filled = options["reuse"] and database_exists(database)
        synthesizer = Synthesizer(options["seed"], settings.EMBEDDING_DIMENSIONS)
        try:
            with scratch_database(database, keep=options["keep"], reuse=options["reuse"]):
                try:
                    if not filled:
                        self._fill(synthesizer, options["owners"], options["memories"])
                    self._run_queries(synthesizer, options)
                finally:
                    # The last recalls' stamps are still being written on a background
                    # thread: they must land in the scratch database before the alias
                    # points back at the service's own (where those ids are other rows).
                    drain_stamps()
        except ScratchRefused as refused:
            raise CommandError(str(refused))
        if not options["keep"]:
            self.stdout.write(f"dropped scratch database {database}")

    # --- fill -----------------------------------------------------------------------

    def _fill(self, synthesizer: Synthesizer, owners: int, per_owner: int) -> None:
        User = get_user_model()
        User.objects.bulk_create(
            User(username=f"{BENCH_OWNER_PREFIX}{index}", password="!") for index in range(owners)
        )
        owner_ids = list(
            User.objects.filter(username__startswith=BENCH_OWNER_PREFIX).values_list(
                "pk", flat=True
            )
        )
        total = owners * per_owner
        table = Memory._meta.db_table
        with connection.cursor() as cursor:
            indexes = drop_secondary_indexes(cursor, table)
        # Likewise the retrieval index's derived tables: built once after the load.
        retrieval_index.pause(vectors=False)

        from pgvector.psycopg import register_vector

        connection.ensure_connection()
        raw = connection.connection
        register_vector(raw)
        started = time.perf_counter()
        with tqdm(total=total, unit="rows", desc="COPY memories") as progress:
            for batch in self._batches(synthesizer, owner_ids, per_owner):
                with (
                    raw.cursor() as cursor,
                    cursor.copy(
                        f"COPY {table} ({FILL_COLUMNS}) FROM STDIN (FORMAT BINARY)"
                    ) as copy,
                ):
                    copy.set_types(FILL_TYPES)
                    for row in batch:
                        copy.write_row(row)
                progress.update(len(batch))
        copy_seconds = time.perf_counter() - started
        self.stdout.write(
            f"filled {total:,} memories for {owners} owner(s) in {copy_seconds:.1f} s "
            f"({total / copy_seconds:,.0f} rows/s, COPY without indexes)"
        )
        started = time.perf_counter()
        with connection.cursor() as cursor:
            for setting, value in build_settings(total).items():
                cursor.execute("SELECT set_config(%s, %s, false)", [setting, value])
            for name, definition in tqdm(indexes, desc="indexes", unit="index"):
                step = time.perf_counter()
                cursor.execute(definition)
                self.stdout.write(f"  index {name}: {time.perf_counter() - step:.1f} s")
            for part, seconds in retrieval_index.resume().items():
                self.stdout.write(f"  {part}: {seconds:.1f} s")
            cursor.execute(f"VACUUM ANALYZE {table}")
            cursor.execute("VACUUM ANALYZE retrieval_ownerentity")
            # The legs read postings by index-only scans: these need the visibility map.
            cursor.execute("VACUUM ANALYZE retrieval_posting")
        index_seconds = time.perf_counter() - started
        self.stdout.write(
            f"built {len(indexes)} indexes and analysed in {index_seconds:.1f} s "
            f"(fill total {copy_seconds + index_seconds:.1f} s, "
            f"{total / (copy_seconds + index_seconds):,.0f} rows/s)"
        )

    def _batches(
        self, synthesizer: Synthesizer, owner_ids: list[int], per_owner: int
    ) -> Iterator[list[tuple]]:
        now = timezone.now()
        two_years = 730 * 86400
        owners = get_user_model().objects.in_bulk(owner_ids)
        for owner_id in owner_ids:
            owner_names = owner_names_of(owners[owner_id])
            # Each owner writes about a handful of favourite topics.
            favourites = synthesizer.numbers.choice(TOPICS, size=8, replace=False)
            for offset in range(0, per_owner, BATCH_ROWS):
                count = min(BATCH_ROWS, per_owner - offset)
                topics = synthesizer.numbers.choice(favourites, size=count)
                vectors = synthesizer.embeddings(topics, MEMORY_NOISE)
                statuses = synthesizer.weighted(STATUSES, count)
                types = synthesizer.weighted(TYPES, count)
                ages = synthesizer.numbers.integers(0, two_years, size=count)
                rows = []
                for index in range(count):
                    text, entities = synthesizer.memory_text(int(topics[index]))
                    created = now - timedelta(seconds=int(ages[index]))
                    active = statuses[index] == "active"
                    about = about_fields(
                        derive_about(
                            text,
                            types[index],
                            entities=tuple(entities),
                            written=created,
                            owner_names=owner_names,
                        )
                    )
                    rows.append(
                        (
                            owner_id,
                            types[index],
                            text,
                            statuses[index],
                            entities,
                            vectors[index],
                            0.8,
                            "import",
                            "",
                            Jsonb({}),
                            created,
                            created if active else None,
                            *(about[column] for column in ABOUT_COLUMNS),
                        )
                    )
                yield rows

    # --- queries --------------------------------------------------------------------

    def _run_queries(self, synthesizer: Synthesizer, options) -> None:
        owners = list(
            get_user_model()
            .objects.filter(username__startswith=BENCH_OWNER_PREFIX)
            .values_list("pk", "username")
        )
        if not owners:
            raise CommandError("The scratch database holds no bench owners.")
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*), count(DISTINCT owner_id) FROM memories_memory")
            rows, owner_count = cursor.fetchone()
        self.stdout.write(
            f"database {options['database']}: {rows:,} memories, {owner_count} owners"
        )
        User = get_user_model()
        owner_objects = {pk: User(pk=pk, username=name) for pk, name in owners}
        planned = []
        warmup = options["warmup"]
        for _ in range(warmup + options["queries"]):
            owner_id = synthesizer.random.choice(owners)[0]
            topic = self._query_topic(synthesizer, owner_id)
            embedding = synthesizer.embeddings(np.array([topic]), QUERY_NOISE)[0].tolist()
            planned.append((owner_objects[owner_id], synthesizer.query_text(topic), embedding))
        load_before = load_average()
        totals: list[float] = []
        per_leg: dict[str, list[float]] = {}
        # recall()'s own split (RecallResult.timings, the route's Server-Timing).
        split: dict[str, list[float]] = {part: [] for part in SPLIT_PARTS}
        counts: list[int] = []
        statuses: dict[str, dict[str, int]] = {}
        for index, (owner, query, embedding) in enumerate(
            tqdm(planned, desc="recall", unit="query")
        ):
            started = time.perf_counter()
            result = recall(
                owner,
                query,
                pipeline=options["pipeline"],
                token_budget=options["budget"],
                query_embedding=embedding,
                exact_scan_max_rows=options["exact_scan_max"],
            )
            elapsed = (time.perf_counter() - started) * 1000
            if index < warmup:
                continue
            totals.append(elapsed)
            for part in SPLIT_PARTS:
                split[part].append(result.timings[part])
            counts.append(len(result.memories))
            for name, report in result.legs.items():
                per_leg.setdefault(name, []).append(report.ms)
                tally = statuses.setdefault(name, {})
                tally[report.status] = tally.get(report.status, 0) + 1
        self.stdout.write(
            f"machine: load average {describe_load(load_before)} before the queries; "
            f"{describe_load(load_average())} after"
        )
        exact_scan_max = options["exact_scan_max"]
        if exact_scan_max is None:
            exact_scan_max = legs.VECTOR_EXACT_SCAN_MAX_ROWS
        self.stdout.write(f"vector leg exact scan up to {exact_scan_max} rows")
        self.stdout.write(
            f"{len(totals)} queries after {warmup} warm-up, "
            f"pipeline {options['pipeline']}, "
            f"{statistics.mean(counts):.1f} memories packed on average"
        )
        self.stdout.write(f"{'':14}{'p50':>9}{'p95':>9}{'p99':>9}  (ms)")
        self._line("recall", totals)
        for name, values in per_leg.items():
            outcome = ", ".join(f"{status} {count}" for status, count in statuses[name].items())
            self._line(f"  {name}", values, outcome)
        for part in SPLIT_PARTS:
            self._line(f"  {part}", split[part])

    def _query_topic(self, synthesizer: Synthesizer, owner_id: int) -> int:
        """Mostly a topic the owner has memories about (people ask about their own
        life), sometimes any topic: the topic of a random memory of theirs."""
        if synthesizer.random.random() >= OWN_TOPIC_SHARE:
            return synthesizer.random.randrange(TOPICS)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT embedding::text FROM memories_memory WHERE owner_id = %s "
                "AND status = 'active' AND embedding IS NOT NULL "
                "ORDER BY created_at DESC OFFSET %s LIMIT 1",
                [owner_id, synthesizer.random.randrange(100)],
            )
            row = cursor.fetchone()
        if row is None:
            return synthesizer.random.randrange(TOPICS)
        vector = np.array([float(x) for x in row[0].strip("[]").split(",")], dtype=np.float32)
        return int(np.argmax(synthesizer.centres @ vector))

    def _line(self, label: str, values: list[float], note: str = "") -> None:
        self.stdout.write(
            f"{label:14}{percentile(values, 0.5):9.2f}{percentile(values, 0.95):9.2f}"
            f"{percentile(values, 0.99):9.2f}  {note}"
        )
