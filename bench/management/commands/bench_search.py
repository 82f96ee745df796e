"""Benchmark search as a user gets it: over HTTP, through gunicorn, with the query embedded.

Creates a scratch database on the same server (never the service's own),
fills it with one owner's memories — realistic text recombined from the
evaluation datasets' memories, embedded for real by the local model — starts
the public site with the same gunicorn command line `make run` uses against
that database, sends the datasets' real questions to ``POST
/v1/memories/search`` at each concurrency, and prints latency percentiles,
throughput, CPU per query and where the time went (the route's
``Server-Timing`` header). With ``--busy N``, N other processes keep a core
busy each while the timed searches run (bench/busy.py). Drops the database
unless ``--keep``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, connections
from django.utils import timezone
from psycopg.types.json import Jsonb
from tqdm import tqdm

from bench.busy import busy
from bench.measure import (
    ABOUT_COLUMNS,
    FILL_COLUMNS,
    FILL_TYPES,
    describe_load,
    load_average,
    percentile,
)
from memories.about import about_fields, derive_about, owner_names_of
from memories.management.commands.serve import public_site_command
from memories.models import ApiToken, Memory
from retrieval.embeddings import LocalEmbeddingProvider, default_local_model_path
from retrieval.evaluation.scratch_database import scratch_database
from retrieval.index import vector_index_paused
from timothy.scratch import database_exists

BENCH_OWNER = "bench-search-owner"


def default_datasets() -> list[Path]:
    """The evaluation datasets in the nearest ``shared/datasets`` above the project."""
    for above in (settings.BASE_DIR.parent, settings.BASE_DIR.parent.parent):
        found = sorted((above / "shared" / "datasets").glob("*.json"))
        if found:
            return found
    return []


# Memories embedded and written per step of the fill.
FILL_BATCH = 2_000
WARMUP_QUERIES = 16
WARMUP_MAX_QUERIES = 400
# Answers in a row whose vector leg must be ok before the timing starts (every
# worker process has loaded its model).
WARM_IN_A_ROW = 8
SERVER_START_SECONDS = 180
REQUEST_TIMEOUT = 60
STOP_SECONDS = 30
TYPES = ("semantic", "preference", "episodic", "reflection")
STAGES = ("embed", "legs", "fuse", "pack", "recall")
# What one owner's memories occupy: the rows, the retrieval index, the events,
# recall's stamps.
SIZED_TABLES = (
    "memories_memory",
    "memories_memoryevent",
    "memories_retrievalstamp",
    "retrieval_posting",
    "retrieval_ownerentity",
    "retrieval_ownercorpuschange",
)
LEGS = ("vector", "text", "entity")


class PersonalCorpus:
    """Memories and questions recombined from real ones (``timothy-eval/1`` files).

    A memory is a real memory whose named entities are swapped for others
    from the same files, and half the time followed by a sentence of another
    memory: the vocabulary, lengths and entity density of real personal
    memories, in as many distinct texts as asked for. Questions are the
    files' own, with their entities swapped the same way.
    """

    def __init__(self, paths: list[Path], seed: int) -> None:
        self.random = random.Random(seed)
        self.memories: list[dict] = []
        self.queries: list[str] = []
        for path in paths:
            data = json.loads(Path(path).read_text())
            for conversation in data["conversations"]:
                self.memories += conversation["memories"]
                self.queries += [query["query"] for query in conversation["queries"]]
        if not self.memories or not self.queries:
            raise CommandError("The datasets hold no memories or no questions.")
        self.entities = sorted({e for m in self.memories for e in m.get("entities", []) if e})
        self.sentences = [
            sentence
            for memory in self.memories
            for sentence in re.split(r"(?<=[.!?])\s+", memory["content"])
            if len(sentence) > 20
        ] or [m["content"] for m in self.memories]

    def _swap_entities(self, text: str, entities: list[str]) -> tuple[str, list[str]]:
        swapped = []
        for entity in entities:
            if entity and entity in text and self.entities:
                other = self.random.choice(self.entities)
                text = text.replace(entity, other)
                swapped.append(other)
            elif entity:
                swapped.append(entity)
        return text, swapped

    def memory(self) -> tuple[str, str, list[str]]:
        base = self.random.choice(self.memories)
        text, entities = self._swap_entities(base["content"], list(base.get("entities", [])))
        if self.random.random() < 0.5:
            text = f"{text} {self.random.choice(self.sentences)}"
        memory_type = base.get("type") if base.get("type") in TYPES else "semantic"
        return text, memory_type, sorted(set(entities))

    def query(self) -> str:
        text = self.random.choice(self.queries)
        named = [entity for entity in self.entities if entity in text]
        if named and self.random.random() < 0.5:
            text, _ = self._swap_entities(text, named[:2])
        return text


class Command(BaseCommand):
    help = "Measure POST /v1/memories/search over HTTP through gunicorn on a scratch database."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=10_000)
        parser.add_argument("--queries", type=int, default=200, help="timed queries per level")
        parser.add_argument("--concurrency", default="1,4,16", help="comma-separated levels")
        parser.add_argument("--database", default="timothy_bench_search")
        parser.add_argument("--dataset", action="append", help="timothy-eval/1 file (repeat)")
        parser.add_argument("--web-workers", type=int, default=2, help="as TIMOTHY_WEB_WORKERS")
        parser.add_argument("--port", type=int, default=0, help="0: any free port")
        parser.add_argument("--runtime", choices=("onnx", "torch"), default=None)
        parser.add_argument("--threads", type=int, default=None, help="embedding threads")
        parser.add_argument(
            "--query-cache", action="store_true", help="keep the server's query cache on"
        )
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--reuse", action="store_true", help="reuse a kept database")
        parser.add_argument("--seed", type=int, default=11)
        parser.add_argument(
            "--busy",
            type=int,
            default=0,
            metavar="N",
            help="N processes keep a core busy each while the timed searches run (other work)",
        )

    def handle(self, *args, **options) -> None:
        levels = [int(level) for level in options["concurrency"].split(",") if level.strip()]
        if not levels or min(levels) < 1:
            raise CommandError("--concurrency takes levels of at least 1, e.g. 1,4,16.")
        if options["busy"] < 0:
            raise CommandError("--busy takes a number of processes, 0 or more.")
        database = options["database"]
        if database == connection.settings_dict["NAME"]:
            raise CommandError("The scratch database must not be the service's own database.")
        datasets = [Path(path) for path in options["dataset"] or default_datasets()]
        if not datasets:
            raise CommandError("No dataset found; name one with --dataset FILE.json.")
        corpus = PersonalCorpus(datasets, options["seed"])
        load_at_start = load_average()
        self.stdout.write(f"machine: load average {describe_load(load_at_start)} at the start")
        filled = options["reuse"] and database_exists(database)
        server = None
        with scratch_database(database, keep=options["keep"], reuse=options["reuse"]):
            try:
                if not filled:
                    call_command("createcachetable", verbosity=0)
                    self._fill(corpus, options["memories"])
                token = self._token()
                url = self._database_url(database)
                connections.close_all()
                server = self._start_server(url, options)
                self._measure(server, token, corpus, levels, options)
            finally:
                if server is not None:
                    self._stop_server(server)
        if not options["keep"]:
            self.stdout.write(f"dropped scratch database {database}")
        self.stdout.write(f"machine: load average {describe_load(load_average())} at the end")

    # --- scratch database -----------------------------------------------------------

    @staticmethod
    def _database_url(name: str) -> str:
        """The scratch database as a URL for the server's DATABASE_URL."""
        config = connection.settings_dict
        user = quote(config.get("USER") or "", safe="")
        password = quote(config.get("PASSWORD") or "", safe="")
        host = config.get("HOST") or config.get("OPTIONS", {}).get("host") or ""
        port = config.get("PORT") or ""
        credentials = f"{user}:{password}@" if user else ""
        if host.startswith("/"):  # a Unix socket folder
            query = f"?host={quote(host, safe='/')}" + (f"&port={port}" if port else "")
            return f"postgresql://{credentials}/{quote(name)}{query}"
        return f"postgresql://{credentials}{host}{':' + str(port) if port else ''}/{quote(name)}"

    def _token(self) -> str:
        owner = get_user_model().objects.get(username=BENCH_OWNER)
        return ApiToken.issue(owner, name="bench_search")[1]

    # --- fill -----------------------------------------------------------------------

    def _fill(self, corpus: PersonalCorpus, count: int) -> None:
        owner = get_user_model().objects.create_user(BENCH_OWNER, password=None)
        # The fill may use every core, as reembed does; the server gets the
        # service's settings.
        provider = LocalEmbeddingProvider(
            Path(settings.EMBEDDING_MODEL or default_local_model_path()),
            batch_size=64,
            runtime="onnx",
            threads=os.cpu_count() or 1,
            export_dir=Path(settings.DATA_DIR) / "models",
            bulk=True,
            precision=settings.EMBEDDING_PRECISION,
        )
        provider.warm_up()
        from pgvector.psycopg import register_vector

        connection.ensure_connection()
        raw = connection.connection
        register_vector(raw)
        embed_seconds = write_seconds = 0.0
        started = time.perf_counter()
        with (
            vector_index_paused(count) as index,
            tqdm(total=count, unit="memories", desc="embed + COPY") as progress,
        ):
            for rows in self._batches(corpus, owner, count):
                step = time.perf_counter()
                vectors = provider.embed([row[2] for row in rows])
                embed_seconds += time.perf_counter() - step
                step = time.perf_counter()
                with (
                    raw.cursor() as cursor,
                    cursor.copy(
                        f"COPY {Memory._meta.db_table} ({FILL_COLUMNS}) FROM STDIN (FORMAT BINARY)"
                    ) as copy,
                ):
                    copy.set_types(FILL_TYPES)
                    for row, vector in zip(rows, vectors, strict=True):
                        copy.write_row((*row[:5], vector, *row[5:]))
                write_seconds += time.perf_counter() - step
                progress.update(len(rows))
        with connection.cursor() as cursor:
            for table in (Memory._meta.db_table, "retrieval_posting", "retrieval_ownerentity"):
                cursor.execute(f"VACUUM ANALYZE {table}")
        total = time.perf_counter() - started
        built = index["index_seconds"]
        self.stdout.write(
            f"filled {count:,} memories in {total:.1f} s: embedding {embed_seconds:.1f} s "
            f"({count / max(embed_seconds, 1e-9):,.0f}/s, {provider!r}), writing "
            f"{write_seconds:.1f} s (COPY, postings by trigger; what each is about derived as an "
            "import does)"
            + (f", vector index built once in {built:.1f} s" if built is not None else "")
        )

    @staticmethod
    def _batches(corpus: PersonalCorpus, owner, count: int) -> Iterator[list[tuple]]:
        now = timezone.now()
        owner_names = owner_names_of(owner)
        for offset in range(0, count, FILL_BATCH):
            rows = []
            for _ in range(min(FILL_BATCH, count - offset)):
                text, memory_type, entities = corpus.memory()
                created = now - timedelta(seconds=corpus.random.randrange(730 * 86400))
                # Most facts were never re-confirmed, as in life.
                confirmed = created if corpus.random.random() < 0.7 else now - timedelta(days=1)
                about = about_fields(
                    derive_about(
                        text,
                        memory_type,
                        entities=tuple(entities),
                        written=created,
                        owner_names=owner_names,
                    )
                )
                rows.append(
                    (
                        owner.pk,
                        memory_type,
                        text,
                        "active",
                        entities,
                        0.8,
                        "import",
                        "",
                        Jsonb({}),
                        created,
                        max(created, confirmed),
                        *(about[column] for column in ABOUT_COLUMNS),
                    )
                )
            yield rows

    # --- the server -----------------------------------------------------------------

    def _start_server(self, database_url: str, options) -> dict:
        port = options["port"] or _free_port()
        bind = f"127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
        env.update(
            DATABASE_URL=database_url,
            TIMOTHY_EMBEDDING_PROVIDER="local",
            # The benchmark is one client asking as fast as it can.
            TIMOTHY_RATE_LIMIT_PER_MINUTE=str(10**9),
            TIMOTHY_EMBEDDING_QUERY_CACHE=env.get("TIMOTHY_EMBEDDING_QUERY_CACHE", "1024")
            if options["query_cache"]
            else "0",
        )
        if options["runtime"]:
            env["TIMOTHY_EMBEDDING_RUNTIME"] = options["runtime"]
        if options["threads"]:
            env["TIMOTHY_EMBEDDING_THREADS"] = str(options["threads"])
        command = public_site_command(bind, options["web_workers"], access_log=False)
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        errors: list[str] = []
        threading.Thread(
            target=lambda: errors.extend(process.stderr), name="gunicorn-stderr", daemon=True
        ).start()
        server = {"process": process, "base": f"http://{bind}", "errors": errors}
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError("gunicorn exited at start:\n" + "".join(errors[-30:]))
            try:
                requests.get(server["base"] + "/login/", timeout=10)
                break
            except requests.RequestException:
                time.sleep(0.3)
        else:
            self._stop_server(server)
            raise CommandError("gunicorn did not answer in time:\n" + "".join(errors[-30:]))
        runtime = env.get("TIMOTHY_EMBEDDING_RUNTIME", settings.EMBEDDING_RUNTIME)
        threads = env.get("TIMOTHY_EMBEDDING_THREADS", settings.EMBEDDING_THREADS)
        precision = env.get("TIMOTHY_EMBEDDING_PRECISION", settings.EMBEDDING_PRECISION)
        self.stdout.write(
            f"server: {' '.join(command[2:])} (as `make run`), {options['web_workers']} "
            f"worker(s) × {settings.WEB_THREADS} threads; embeddings local, {runtime} "
            f"{precision}, {threads} thread(s) per process, "
            f"query cache {'on' if options['query_cache'] else 'off'}"
        )
        return server

    def _stop_server(self, server: dict) -> None:
        process: subprocess.Popen = server["process"]
        if process.poll() is None:
            # Gracefully: the workers finish their requests and their stamps.
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    # --- measuring ------------------------------------------------------------------

    def _measure(self, server: dict, token: str, corpus: PersonalCorpus, levels, options):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), count(embedding) FROM memories_memory WHERE status = 'active'"
            )
            active, embedded = cursor.fetchone()
        self.stdout.write(
            f"database {options['database']}: one owner, {active:,} active memories "
            f"({embedded:,} with vectors)"
        )
        connections.close_all()
        client = _Client(server["base"], token)
        self._warm_up(client, corpus)
        with busy(options["busy"]) as others:
            splits = self._levels(server, client, corpus, levels, options, others)
        for level, ok in splits.items():
            self._split(level, ok, options["busy"])
        self._sizes(server["process"].pid)
        if server["errors"]:
            self.stdout.write(f"server stderr ({len(server['errors'])} lines), last lines:")
            for line in server["errors"][-5:]:
                self.stdout.write("  " + line.rstrip())

    def _levels(self, server: dict, client: _Client, corpus, levels, options, others) -> dict:
        """Each level's timed searches, with ``others`` (busy processes) running, if any."""
        if others is not None:
            self.stdout.write(
                f"BUSY: {others.count} other process(es) keep a core busy each during the "
                "timed searches (numpy on one thread, the service's niceness)"
            )
        else:
            self.stdout.write("quiet: no other work started (--busy 0)")
        self.stdout.write(
            f"{'concurrency':>11} {'queries':>8} {'errors':>7} {'p50':>8} {'p95':>8} "
            f"{'p99':>8} (ms) {'per s':>7}   cpu ms/query (web + db)   load after"
        )
        splits = {}
        for level in levels:
            cpu = _CpuMeter(server["process"].pid)
            queries = [corpus.query() for _ in range(options["queries"])]
            results, seconds = client.run(queries, level)
            web_ms, db_ms = cpu.per_query(len(queries))
            ok = [result for result in results if result["status"] == 200]
            totals = [result["ms"] for result in ok]
            cpu_text = (
                "n/a"
                if web_ms is None
                else f"{web_ms:.1f} + " + ("n/a" if db_ms is None else f"{db_ms:.1f}")
            )
            self.stdout.write(
                f"{level:>11} {len(queries):>8} {len(results) - len(ok):>7} "
                f"{percentile(totals, 0.5):>8.1f} {percentile(totals, 0.95):>8.1f} "
                f"{percentile(totals, 0.99):>8.1f}      {len(ok) / seconds:>7.1f}   "
                f"{cpu_text:<24}  {load_average():.2f}"
            )
            splits[level] = ok
        if others is not None:
            share = others.cpu_share()
            self.stdout.write(
                f"BUSY: each other process had {share:.0%} of a core during the timed searches"
                if share is not None
                else "BUSY: the other processes' CPU could not be read"
            )
        return splits

    def _sizes(self, gunicorn_pid: int) -> None:
        """What one owner's memories cost on disk, and a web worker in memory."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memories_memory WHERE status = 'active'")
            memories = cursor.fetchone()[0] or 1
            cursor.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "WHERE c.relname = ANY(%s)",
                [list(SIZED_TABLES)],
            )
            sizes = dict(cursor.fetchall())
        connections.close_all()
        total = sum(sizes.values())
        self.stdout.write(
            f"disk: {total / 2**20:,.1f} MB for {memories:,} memories, "
            f"{total / memories / 1024:.2f} KB each ("
            + ", ".join(f"{name} {size / memories / 1024:.2f}" for name, size in sizes.items())
            + " KB, indexes included)"
        )
        try:
            import psutil

            workers = psutil.Process(gunicorn_pid).children()
            rss = [worker.memory_info().rss / 2**20 for worker in workers]
        except Exception:
            rss = []
        if rss:
            self.stdout.write(
                f"memory: web worker RSS {', '.join(f'{value:.0f}' for value in rss)} MB"
            )

    def _warm_up(self, client: _Client, corpus: PersonalCorpus) -> None:
        in_a_row = 0
        deadline = time.monotonic() + SERVER_START_SECONDS
        sent = 0
        while (in_a_row < WARM_IN_A_ROW or sent < WARMUP_QUERIES) and time.monotonic() < deadline:
            result = client.search(corpus.query())
            sent += 1
            if sent >= WARMUP_MAX_QUERIES:
                break
            vector_ok = result["status"] == 200 and result["legs"].get("vector") == "ok"
            in_a_row = in_a_row + 1 if vector_ok else 0
        if in_a_row < WARM_IN_A_ROW:
            self.stdout.write(
                f"warning: the vector leg still failed after {sent} warm-up queries "
                f"(last answer {result['status']}, legs {result['legs']})"
            )
        self.stdout.write(f"warm-up: {sent} queries")

    def _split(self, level: int, ok: list[dict], others: int = 0) -> None:
        if not ok:
            return
        parts = {name: [r["timing"].get(name, 0.0) for r in ok] for name in STAGES}
        parts["http"] = [r["ms"] - r["timing"].get("recall", 0.0) for r in ok]
        legs = {name: [r["timing"].get(f"leg-{name}", 0.0) for r in ok] for name in LEGS}
        statuses: dict[str, dict[str, int]] = {}
        for result in ok:
            for name, status in result["legs"].items():
                tally = statuses.setdefault(name, {})
                tally[status] = tally.get(status, 0) + 1
        self.stdout.write(
            f"concurrency {level}{f' (BUSY: {others} other processes)' if others else ''}, "
            "where the time went (ms, p50 / p95): "
            + ", ".join(
                f"{name} {percentile(values, 0.5):.1f} / {percentile(values, 0.95):.1f}"
                for name, values in parts.items()
            )
        )
        self.stdout.write(
            "  legs (inside `legs`; the vector leg includes `embed`): "
            + ", ".join(
                f"{name} {percentile(values, 0.5):.1f} / {percentile(values, 0.95):.1f} "
                f"({', '.join(f'{s} {n}' for s, n in statuses.get(name, {}).items())})"
                for name, values in legs.items()
            )
        )
        self.stdout.write(
            f"  packed {statistics.mean(r['packed'] for r in ok):.1f} memories on average"
        )


class _Client:
    """Sends searches, one keep-alive session per client thread."""

    def __init__(self, base: str, token: str) -> None:
        self.url = base + "/v1/memories/search"
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.local = threading.local()

    def search(self, query: str) -> dict:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        started = time.perf_counter()
        try:
            response = session.post(
                self.url, json={"query": query}, headers=self.headers, timeout=REQUEST_TIMEOUT
            )
            body = response.json() if response.status_code == 200 else {}
            status = response.status_code
            header = response.headers.get("Server-Timing", "")
        except requests.RequestException:
            body, status, header = {}, 0, ""
        elapsed = (time.perf_counter() - started) * 1000
        return {
            "status": status,
            "ms": elapsed,
            "timing": _server_timing(header),
            "legs": {name: leg["status"] for name, leg in body.get("legs", {}).items()},
            "packed": len(body.get("memories", [])),
        }

    def run(self, queries: list[str], concurrency: int) -> tuple[list[dict], float]:
        pending = iter(queries)
        lock = threading.Lock()
        results: list[dict] = []

        def work() -> None:
            while True:
                with lock:
                    query = next(pending, None)
                if query is None:
                    return
                result = self.search(query)
                with lock:
                    results.append(result)

        threads = [threading.Thread(target=work) for _ in range(concurrency)]
        started = time.perf_counter()
        with tqdm(total=len(queries), desc=f"concurrency {concurrency}", unit="query") as bar:
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                bar.n = len(results)
                bar.refresh()
                time.sleep(0.2)
            bar.n = len(results)
            bar.refresh()
        return results, time.perf_counter() - started


def _server_timing(header: str) -> dict[str, float]:
    timing = {}
    for part in header.split(","):
        name, _, duration = part.strip().partition(";dur=")
        if name and duration:
            with contextlib.suppress(ValueError):
                timing[name] = float(duration)
    return timing


class _CpuMeter:
    """CPU seconds spent by the gunicorn processes and the local PostgreSQL between two reads."""

    def __init__(self, gunicorn_pid: int) -> None:
        self.gunicorn_pid = gunicorn_pid
        self.start = self._read()

    def _read(self) -> tuple[float | None, float | None]:
        try:
            import psutil
        except ImportError:
            return None, None
        try:
            web = _tree_cpu(psutil.Process(self.gunicorn_pid))
        except psutil.Error:
            return None, None
        database = None
        pid_file = _postmaster_pid_file()
        if pid_file is not None:
            try:
                database = _tree_cpu(psutil.Process(int(pid_file.read_text().split()[0])))
            except (psutil.Error, OSError, ValueError, IndexError):
                database = None
        return web, database

    def per_query(self, queries: int) -> tuple[float | None, float | None]:
        end = self._read()
        return tuple(
            None if a is None or b is None else (b - a) * 1000 / max(queries, 1)
            for a, b in zip(self.start, end, strict=True)
        )


def _tree_cpu(parent) -> float:
    """CPU seconds of a process and its children, living and exited.

    A database backend that ends between two reads would take its CPU with it;
    once its parent has reaped it, the parent's children_* times hold it.
    """
    times = parent.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in parent.children(recursive=True):
        try:
            child_times = child.cpu_times()
            total += child_times.user + child_times.system
        except Exception:
            continue
    return total


def _postmaster_pid_file() -> Path | None:
    """The embedded server's pid file (None with DATABASE_URL: not this machine's to read)."""
    if not settings.EMBEDDED_DATABASE:
        return None
    path = Path(settings.DATA_DIR) / "postgres" / "postmaster.pid"
    return path if path.exists() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
