"""Load test: concurrent clients against `make run` on a scratch database.

Fills a scratch database on the same server with ``--owners`` owners'
synthetic memories (``--memories`` each; the fill of ``bench_recall``),
starts ``manage.py serve`` on it (the gunicorn, worker and settings of
`make run`, on free ports), and runs
``--clients`` threads for ``--seconds``, each sending searches and writes
(``--write-share`` of them writes) through its own API token (client n acts
for owner n modulo ``--owners``). Prints latency
percentiles per kind, throughput, answers by status, and checks that every
acknowledged write is in the database. Fails (exit 1) on any 5xx, any request
left without an answer, or a lost write. docs/reliability.md has the figures.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from urllib.parse import quote

import psutil
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, connections

from bench.management.commands.bench_recall import (
    BENCH_OWNER_PREFIX,
    DEFAULT_SEED,
    TOPICS,
    TYPES,
    Synthesizer,
    percentile,
)
from bench.management.commands.bench_recall import Command as BenchRecall
from memories.models import ApiToken, Memory
from retrieval.evaluation.scratch_database import ScratchRefused, scratch_database
from timothy.drill import (
    HTTP_TIMEOUT,
    ServeProcess,
    postgres_processes,
    service_env,
    wait_for,
)
from timothy.scratch import database_exists

# Seconds serve may take to start (migrate, load the model, fork gunicorn).
START_SECONDS = 300
# Searches in a row with every leg answering before the load begins: each
# gunicorn worker loads its own embedding model.
WARM_SEARCHES = 6
# How long --min-requests may stretch the measured window.
OVERTIME_SECONDS = 600
# How often the CPU meter reads every process's CPU time.
METER_SAMPLE_SECONDS = 1.0


@dataclass
class Answer:
    kind: str
    status: int | str
    ms: float
    measured: bool
    # A search's retrieval legs that failed or ran out of time (e.g. "vector timeout").
    degraded_legs: tuple[str, ...] = ()


def scratch_database_url(name: str) -> str:
    """The URL of database ``name`` on the server the service uses."""
    config = connection.settings_dict
    host = config["HOST"] or config["OPTIONS"].get("host", "")
    user = quote(config["USER"] or "", safe="")
    password = quote(config["PASSWORD"] or "", safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    if host.startswith("/"):
        location = quote(host, safe="")  # a Unix socket folder
    else:
        location = host + (f":{config['PORT']}" if config["PORT"] else "")
    return f"postgresql://{credentials}{location}/{quote(name, safe='')}"


class CpuMeter:
    """CPU seconds used between ``start`` and ``stop`` by kind of process: serve's
    web workers, its background worker, its other processes, PostgreSQL (its
    own processes and the backends of ``database``, when the server is the
    embedded one), and this process (the clients). ``sample`` is called every
    ``METER_SAMPLE_SECONDS``: a process that exits in between (a database
    connection past its CONN_MAX_AGE, an autovacuum worker) takes only the
    seconds since the last sample with it."""

    def __init__(self, service: ServeProcess, database: str) -> None:
        self.service = service
        self.database = database
        self.used: Counter[str] = Counter()
        self.seconds = 0.0

    def _snapshot(self) -> dict[int, tuple[str, float]]:
        found: list[tuple[str, psutil.Process]] = [("load clients", psutil.Process())]
        for process in [psutil.Process(self.service.process.pid), *self.service.children()]:
            command = _command(process)
            if "timothy.wsgi" in command:
                found.append(("web workers", process))
            elif "qcluster" in command:
                found.append(("background worker", process))
            else:
                found.append(("serve, internal listener", process))
        for process in postgres_processes(settings.DATA_DIR):
            command = _command(process)
            # Another database's backend is someone else's work.
            backend = "[local]" in command or "127.0.0.1" in command
            if backend and f" {self.database} " not in command:
                continue
            found.append(("PostgreSQL", process))
        snapshot = {}
        for kind, process in found:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            snapshot[process.pid] = (kind, times.user + times.system)
        return snapshot

    def start(self) -> None:
        self._started = time.monotonic()
        self._last = self._snapshot()

    def sample(self) -> None:
        current = self._snapshot()
        for pid, (kind, seconds) in current.items():
            self.used[kind] += seconds - self._last.get(pid, (kind, 0.0))[1]
        self._last = current

    def stop(self) -> None:
        self.sample()
        self.seconds = time.monotonic() - self._started


def _command(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


class Command(BaseCommand):
    help = "Load-test make run's gunicorn with concurrent searches and writes on a scratch store."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=100_000, help="memories of each owner")
        parser.add_argument(
            "--owners",
            type=int,
            default=1,
            help="owners, each with --memories; client n acts for owner n modulo this",
        )
        parser.add_argument("--clients", type=int, default=32)
        parser.add_argument("--seconds", type=float, default=60.0, help="measured duration")
        parser.add_argument(
            "--warmup", type=float, default=10.0, help="seconds of unmeasured load first"
        )
        parser.add_argument(
            "--min-requests",
            type=int,
            default=0,
            help="measure past --seconds until this many searches (and writes, if any) were "
            f"sent, for at most {OVERTIME_SECONDS // 60} more minutes: a slow machine still "
            "gives figures (default 0)",
        )
        parser.add_argument("--write-share", type=float, default=0.2)
        parser.add_argument(
            "--web-workers",
            type=int,
            default=settings.WEB_WORKERS,
            help="gunicorn worker processes, as make run (default 2)",
        )
        parser.add_argument(
            "--web-threads",
            type=int,
            default=settings.WEB_THREADS,
            help="threads per gunicorn worker, as make run (default 4)",
        )
        parser.add_argument("--database", default="timothy_load", help="scratch database name")
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--reuse", action="store_true", help="reuse a kept scratch database")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED)

    def handle(self, *args, **options) -> None:
        database = options["database"]
        filled = options["reuse"] and database_exists(database)
        url = scratch_database_url(database)
        try:
            with scratch_database(database, keep=options["keep"], reuse=options["reuse"]):
                if not filled:
                    filler = BenchRecall(stdout=self.stdout, stderr=self.stderr)
                    synthesizer = Synthesizer(options["seed"], settings.EMBEDDING_DIMENSIONS)
                    filler._fill(synthesizer, options["owners"], options["memories"])
                owners = list(
                    get_user_model().objects.filter(
                        username__in=[f"{BENCH_OWNER_PREFIX}{n}" for n in range(options["owners"])]
                    )
                )
                if len(owners) != options["owners"]:
                    raise CommandError(
                        f"The scratch database {database} holds {len(owners)} bench owner(s), "
                        f"not {options['owners']}; drop it or run without --reuse."
                    )
                owners.sort(key=lambda user: int(user.username.removeprefix(BENCH_OWNER_PREFIX)))
                stored = Memory.objects.filter(owner__in=owners).count()
                tokens = [
                    ApiToken.issue(owners[n % len(owners)], f"load client {n}")[1]
                    for n in range(options["clients"])
                ]
                connections.close_all()
                self._run(url, tokens, stored, options)
        except ScratchRefused as refused:
            raise CommandError(str(refused))
        if not options["keep"]:
            self.stdout.write(f"dropped scratch database {database}")

    # --- the run ------------------------------------------------------------------------

    def _run(self, url: str, tokens: list[str], stored: int, options) -> None:
        env = service_env(
            settings.DATA_DIR,
            DATABASE_URL=url,
            TIMOTHY_EMBEDDING_PROVIDER=settings.EMBEDDING_PROVIDER,
            TIMOTHY_WEB_WORKERS=str(options["web_workers"]),
            TIMOTHY_WEB_THREADS=str(options["web_threads"]),
            TIMOTHY_WORKERS=str(settings.Q_CLUSTER["workers"]),
        )
        service = ServeProcess(env)
        try:
            service.wait_for_output("Ctrl-C stops everything", timeout=START_SECONDS)
            wait_for(service.answers, START_SECONDS, "the site to answer")
            self._wait_until_warm(service.base, tokens[0])
            session_id = f"load-{uuid.uuid4().hex[:12]}"
            meter = CpuMeter(service, url.rsplit("/", 1)[1])
            answers = self._load(service.base, tokens, session_id, options, meter)
            load_after = os.getloadavg()
            acknowledged = sum(
                1 for answer in answers if answer.kind == "write" and answer.status == 201
            )
        finally:
            code = service.stop()
            # Not postgres=True: the server and its data folder are the service's own.
            service.kill(postgres=False)
        written = Memory.objects.filter(session_id=session_id).count()
        self._report(answers, options, stored, load_after, acknowledged, written)
        self._report_cpu(meter, sum(answer.measured for answer in answers))
        self._report_server_log(service.output, code)
        problems = []
        failed = Counter(
            answer.status
            for answer in answers
            if not isinstance(answer.status, int) or answer.status >= 500
        )
        if failed:
            problems.append("answers " + ", ".join(f"{k}: {v}" for k, v in failed.items()))
        if written != acknowledged:
            problems.append(f"{acknowledged} writes acknowledged but {written} in the database")
        if problems:
            raise CommandError("The load test failed: " + "; ".join(problems) + ".")

    def _report_server_log(self, output: str, code: int) -> None:
        """How many warnings and errors the service logged, by logger, with one of each."""
        found: dict[str, list[str]] = {}
        for line in output.splitlines():
            match = re.search(r" (WARNING|ERROR) ([\w.-]+): ", line)
            if match:
                found.setdefault(f"{match[1]} {match[2]}", []).append(line)
        self.stdout.write(
            f"server log: serve exited with {code}; "
            + (", ".join(f"{key} {len(lines)}" for key, lines in found.items()) or "no warnings")
        )
        for lines in found.values():
            self.stdout.write(f"  e.g. {lines[0][:240]}")

    def _wait_until_warm(self, base: str, token: str) -> None:
        """Measure a running service, not one still loading its embedding model:
        wait until WARM_SEARCHES searches in a row have every leg answering."""
        if settings.EMBEDDING_PROVIDER == "none":
            return
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"
        started = time.monotonic()
        in_a_row = 0
        while in_a_row < WARM_SEARCHES:
            if time.monotonic() - started > START_SECONDS:
                self.stderr.write(
                    f"The vector leg still fails after {START_SECONDS} s; measuring anyway."
                )
                return
            try:
                response = session.post(
                    base + "/v1/memories/search", json={"query": "warm"}, timeout=HTTP_TIMEOUT
                )
                legs = response.json()["legs"].values() if response.status_code == 200 else []
                warm = bool(legs) and all(leg["status"] == "ok" for leg in legs)
            except (requests.RequestException, ValueError, KeyError):
                warm = False
            in_a_row = in_a_row + 1 if warm else 0
        self.stdout.write(f"embedding model warm after {time.monotonic() - started:.0f} s")

    def _load(
        self, base: str, tokens: list[str], session_id: str, options, meter: CpuMeter
    ) -> list[Answer]:
        answers: list[Answer] = []
        lock = threading.Lock()
        started = time.monotonic()
        measure_from = started + options["warmup"]
        stop_at = measure_from + options["seconds"]
        give_up_at = stop_at + OVERTIME_SECONDS
        wanted = {"search": options["min_requests"]}
        if options["write_share"] > 0:
            wanted["write"] = options["min_requests"]
        measured = Counter()
        self.load_before = os.getloadavg()
        self.window_end = None

        def measuring(now: float) -> bool:
            """Whether a request sent now still counts; ends the window once it is over."""
            with lock:
                if self.window_end is None and (
                    now >= give_up_at
                    or (now >= stop_at and all(measured[k] >= n for k, n in wanted.items()))
                ):
                    self.window_end = now
                return self.window_end is None

        def client(number: int, token: str) -> None:
            synthesizer = Synthesizer(options["seed"] + number, settings.EMBEDDING_DIMENSIONS)
            rng = random.Random(options["seed"] * 1000 + number)
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {token}"
            while measuring(now := time.monotonic()):
                topic = rng.randrange(TOPICS)
                if rng.random() < options["write_share"]:
                    kind, path = "write", "/v1/memories"
                    content, entities = synthesizer.memory_text(topic)
                    body = {
                        "content": content,
                        "type": synthesizer.weighted(TYPES, 1)[0],
                        "mode": "remember",
                        "entities": entities,
                        "session_id": session_id,
                    }
                else:
                    kind, path = "search", "/v1/memories/search"
                    body = {"query": synthesizer.query_text(topic)}
                began = time.perf_counter()
                degraded: tuple[str, ...] = ()
                try:
                    response = session.post(base + path, json=body, timeout=HTTP_TIMEOUT)
                    status: int | str = response.status_code
                    if kind == "search" and status == 200:
                        degraded = tuple(
                            f"{name} {leg['status']}"
                            for name, leg in response.json()["legs"].items()
                            if leg["status"] not in ("ok", "skipped")
                        )
                except requests.RequestException as error:
                    status = type(error).__name__
                answer = Answer(
                    kind,
                    status,
                    (time.perf_counter() - began) * 1000,
                    now >= measure_from,
                    degraded,
                )
                with lock:
                    answers.append(answer)
                    if answer.measured:
                        measured[kind] += 1

        def metering() -> None:
            """CPU seconds used over the measured window, by kind of process."""
            time.sleep(max(0.0, measure_from - time.monotonic()))
            meter.start()
            next_sample = time.monotonic() + METER_SAMPLE_SECONDS
            while self.window_end is None and time.monotonic() < give_up_at + HTTP_TIMEOUT:
                time.sleep(0.1)
                if time.monotonic() >= next_sample:
                    meter.sample()
                    next_sample += METER_SAMPLE_SECONDS
            meter.stop()

        meter_thread = threading.Thread(target=metering, daemon=True)
        meter_thread.start()
        threads = [
            threading.Thread(target=client, args=(number, token), daemon=True)
            for number, token in enumerate(tokens)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(
                timeout=options["warmup"]
                + options["seconds"]
                + OVERTIME_SECONDS
                + HTTP_TIMEOUT
                + 30
            )
        self.measured_seconds = (self.window_end or time.monotonic()) - measure_from
        meter_thread.join(timeout=30)
        return answers

    def _report_cpu(self, meter: CpuMeter, requests_measured: int) -> None:
        if not meter.used or not requests_measured:
            return
        self.stdout.write(
            f"CPU per measured request ({sum(meter.used.values()):.1f} CPU seconds over "
            f"{meter.seconds:.1f} s): "
            + ", ".join(
                f"{kind} {seconds * 1000 / requests_measured:.1f} ms"
                for kind, seconds in sorted(meter.used.items(), key=lambda item: -item[1])
            )
            + f"; total {sum(meter.used.values()) * 1000 / requests_measured:.1f} ms"
        )

    def _report(self, answers, options, stored, load_after, acknowledged, written) -> None:
        measured = [answer for answer in answers if answer.measured]
        seconds = round(self.measured_seconds, 1)
        self.stdout.write(
            f"load: {options['clients']} clients for {seconds:g} s (after {options['warmup']:g} s "
            f"of warm-up), {options['write_share']:.0%} writes, against make run's gunicorn "
            f"({options['web_workers']} workers x {options['web_threads']} threads), "
            f"{stored:,} memories of {options['owners']} owner(s), "
            f"embeddings: {settings.EMBEDDING_PROVIDER}"
            + (f" ({_local_model()})" if settings.EMBEDDING_PROVIDER == "local" else "")
        )
        self.stdout.write(
            f"machine: {os.cpu_count()} cores, load average {self.load_before[0]:.1f} before, "
            f"{load_after[0]:.1f} after (1 min), {load_after[1]:.1f} (5 min)"
        )
        self.stdout.write(
            f"requests: {len(measured):,} in {seconds:g} s = {len(measured) / seconds:.1f}/s "
            f"(search {sum(a.kind == 'search' for a in measured):,}, "
            f"write {sum(a.kind == 'write' for a in measured):,})"
        )
        self.stdout.write(f"{'':10}{'count':>8}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}  (ms)")
        for label, group in (
            ("search", [a for a in measured if a.kind == "search"]),
            ("write", [a for a in measured if a.kind == "write"]),
            ("all", measured),
        ):
            values = [a.ms for a in group]
            self.stdout.write(
                f"{label:10}{len(values):>8}"
                + "".join(f"{percentile(values, q):>9.0f}" for q in (0.5, 0.95, 0.99))
                + f"{max(values, default=float('nan')):>9.0f}"
            )
        statuses = Counter(a.status for a in measured)
        self.stdout.write(
            "answers by status: "
            + ", ".join(
                f"{status} {count:,}" for status, count in sorted(statuses.items(), key=str)
            )
        )
        fives = sum(
            count for status, count in statuses.items() if isinstance(status, int) and status >= 500
        )
        unanswered = sum(count for status, count in statuses.items() if not isinstance(status, int))
        self.stdout.write(f"5xx: {fives}; without an answer: {unanswered}")
        searches = [a for a in measured if a.kind == "search" and a.status == 200]
        legs = Counter(leg for a in searches for leg in a.degraded_legs)
        self.stdout.write(
            f"searches answered with a retrieval leg missing: "
            f"{sum(bool(a.degraded_legs) for a in searches):,} of {len(searches):,}"
            + (
                " (" + ", ".join(f"{leg} {n:,}" for leg, n in legs.most_common()) + ")"
                if legs
                else ""
            )
        )
        self.stdout.write(
            f"writes (warm-up included): {acknowledged:,} acknowledged, {written:,} in the "
            "database" + (" (none lost)" if written == acknowledged else " (MISMATCH)")
        )


def _local_model() -> str:
    """How the service runs the local model: "onnx int8", "torch"."""
    runtime = (settings.EMBEDDING_RUNTIME or "onnx").lower()
    return f"{runtime} {settings.EMBEDDING_PRECISION}" if runtime == "onnx" else runtime
