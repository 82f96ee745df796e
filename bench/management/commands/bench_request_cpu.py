"""CPU and statements per API request, in one process, on bench_load's kept scratch store.

Sends ``--searches`` searches and ``--creates`` creates (remember) of
bench_load's synthetic traffic through Django's test client (the whole
middleware, DRF, authentication, rate limit and access log, no HTTP server)
to the owners of a scratch database that ``bench_load --keep`` filled, and
prints, per kind of request, the CPU this process used (request threads,
recall's legs, the background writers), the CPU PostgreSQL's backends of
that database used, and the statements sent (every psycopg ``execute``, on
any thread). ``--profile search|create`` prints cProfile's top functions
(CPU clock) for that kind instead. Warm-up requests come first, unmeasured.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import re
import threading
import time
from collections import Counter

import psutil
import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.test import Client

from bench.management.commands.bench_recall import (
    BENCH_OWNER_PREFIX,
    DEFAULT_SEED,
    TOPICS,
    TYPES,
    Synthesizer,
)
from bench.measure import describe_load, load_average
from memories import access_log
from memories.models import ApiToken
from retrieval.evaluation.scratch_database import scratch_database
from retrieval.recall import drain_stamps
from timothy.drill import postgres_processes
from timothy.scratch import database_exists


class StatementCounter:
    """Counts every statement psycopg sends, on any thread, while installed, and
    the CPU the server's backend spent on each kind (its ``/proc/PID/schedstat``
    before and after, where the server runs on this machine)."""

    def __init__(self) -> None:
        self.count = 0
        self.texts: Counter[str] = Counter()
        self.backend_ns: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __enter__(self) -> StatementCounter:
        self._original = original = psycopg.Cursor.execute
        counter = self

        def execute(cursor, query, *args, **kwargs):
            text = query if isinstance(query, str) else str(getattr(query, "_obj", query))
            key = re.sub(r"\s+", " ", text).strip()[:90]
            pid = cursor.connection.info.backend_pid
            before = _backend_ns(pid)
            try:
                return original(cursor, query, *args, **kwargs)
            finally:
                used = _backend_ns(pid) - before
                with counter._lock:
                    counter.count += 1
                    counter.texts[key] += 1
                    counter.backend_ns[key] += used

        psycopg.Cursor.execute = execute
        return self

    def __exit__(self, *exc) -> None:
        psycopg.Cursor.execute = self._original


def _backend_ns(pid: int) -> int:
    """CPU time a local process has run, in ns (0 if it cannot be read)."""
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


class Command(BaseCommand):
    help = "CPU (this process and PostgreSQL) and statements per search and per create."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--database", default="timothy_load", help="bench_load's kept store")
        parser.add_argument("--searches", type=int, default=200)
        parser.add_argument("--creates", type=int, default=50)
        parser.add_argument("--warmup", type=int, default=20, help="requests of each kind first")
        parser.add_argument("--profile", choices=("search", "create"))
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED)

    def handle(self, *args, **options) -> None:
        name = options["database"]
        if not database_exists(name):
            raise CommandError(f"No database {name}: run bench_load --keep --database {name}.")
        with scratch_database(name, keep=True, reuse=True):
            owners = list(get_user_model().objects.filter(username__startswith=BENCH_OWNER_PREFIX))
            if not owners:
                raise CommandError(f"{name} holds no bench owner.")
            tokens = [ApiToken.issue(owner, "bench_request_cpu")[1] for owner in owners]
            self._run(name, tokens, options)

    def _run(self, name: str, tokens: list[str], options) -> None:
        synthesizer = Synthesizer(options["seed"] + 7, settings.EMBEDDING_DIMENSIONS)
        # New texts each run: a text the store already holds is remembered as
        # its new version, a different (dearer) create.
        writer = Synthesizer(time.time_ns() % 2**31, settings.EMBEDDING_DIMENSIONS)
        rng = random.Random(options["seed"])
        client = Client(HTTP_HOST="localhost")
        turn = iter(range(10**9))

        def send(kind: str) -> None:
            token = tokens[next(turn) % len(tokens)]
            topic = rng.randrange(TOPICS)
            if kind == "search":
                path, body = "/v1/memories/search", {"query": synthesizer.query_text(topic)}
            else:
                content, entities = writer.memory_text(topic)
                path = "/v1/memories"
                body = {
                    "content": content,
                    "type": writer.weighted(TYPES, 1)[0],
                    "mode": "remember",
                    "entities": entities,
                    "session_id": "bench-request-cpu",
                }
            response = client.post(
                path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
            )
            if response.status_code not in (200, 201):
                raise CommandError(f"{kind} answered {response.status_code}: {response.content!r}")

        for kind in ("search", "create"):
            for _ in range(options["warmup"]):
                send(kind)
        drain_stamps()
        access_log.drain()
        self.stdout.write(f"load average {describe_load(load_average())} before")
        for kind, count in (("search", options["searches"]), ("create", options["creates"])):
            if not count:
                continue
            if options["profile"] == kind:
                self._profile(send, kind, count)
                continue
            backends = self._backends(name)
            before_pg = self._cpu(backends)
            before = time.process_time()
            with StatementCounter() as statements:
                for _ in range(count):
                    send(kind)
                drain_stamps()
                access_log.drain()
            used = time.process_time() - before
            used_pg = sum(
                seconds - before_pg.get(pid, 0.0)
                for pid, seconds in self._cpu(self._backends(name)).items()
            )
            self.stdout.write(
                f"{kind}: {count} requests, this process {used * 1000 / count:.2f} ms, "
                f"PostgreSQL {used_pg * 1000 / count:.2f} ms, "
                f"total {(used + used_pg) * 1000 / count:.2f} ms of CPU a request; "
                f"{statements.count / count:.2f} statements a request"
            )
            self.stdout.write("    a request: statements, PostgreSQL ms, statement")
            for text, ns in statements.backend_ns.most_common(14):
                self.stdout.write(
                    f"    {statements.texts[text] / count:5.2f} {ns / 1e6 / count:6.2f}  {text}"
                )
        self.stdout.write(f"load average {describe_load(load_average())} after")

    def _profile(self, send, kind: str, count: int) -> None:
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for _ in range(count):
            send(kind)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(25)
        self.stdout.write(out.getvalue())

    @staticmethod
    def _backends(name: str) -> list[psutil.Process]:
        found = []
        for process in postgres_processes(settings.DATA_DIR):
            try:
                if f" {name} " in " ".join(process.cmdline()):
                    found.append(process)
            except psutil.Error:
                continue
        return found

    @staticmethod
    def _cpu(processes: list[psutil.Process]) -> dict[int, float]:
        seconds = {}
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            seconds[process.pid] = times.user + times.system
        return seconds
