"""Cold start: how soon `make run`'s stack answers a search, and within what.

Fills a scratch database with one owner's synthetic memories (the fill of
``bench_recall``), starts ``manage.py serve`` on it (the gunicorn, workers and
settings of `make run`, on free ports) and sends one search after another,
each with a client deadline of ``--deadline`` seconds (the client's 0.5 s),
until the vector leg answers. Then, ``--restarts`` times, it stops every
worker of the public site at once (SIGTERM, or SIGKILL with ``--signal KILL``
as if they crashed; gunicorn starts new ones) and does the same. For the
start and each restart it prints when the site first answered a search, that
search's time and its vector leg (``skipped`` while the worker's embedding
model loads), when the vector leg first answered, how many searches missed
the deadline, and the longest time without an answer.
docs/reliability.md has the figures.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import psutil
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from bench.management.commands.bench_load import scratch_database_url
from bench.management.commands.bench_recall import BENCH_OWNER_PREFIX, DEFAULT_SEED, Synthesizer
from bench.management.commands.bench_recall import Command as BenchRecall
from memories.models import ApiToken
from retrieval.evaluation.scratch_database import ScratchRefused, scratch_database
from timothy.drill import ServeProcess, service_env
from timothy.scratch import database_exists

# Seconds to wait for the site, then for the vector leg, before giving up.
GIVE_UP_SECONDS = 300
# Pause between searches.
PAUSE_SECONDS = 0.05
QUERY = "what does she like to drink in the morning"


@dataclass
class Probe:
    sent: float  # seconds since the start or the restart
    outcome: str  # "refused", "late" (no answer within the deadline), or the HTTP status
    ms: float
    vector: str = ""  # the vector leg's status, and why, of an answered search


@dataclass
class Phase:
    name: str
    probes: list[Probe]
    # Seconds until the workers stopped were all gone (restarts).
    old_gone: float | None = None

    @property
    def first_answer(self) -> Probe | None:
        return next((p for p in self.probes if p.outcome == "200"), None)

    @property
    def first_vector(self) -> Probe | None:
        return next((p for p in self.probes if p.vector == "ok"), None)

    @property
    def late(self) -> int:
        """Searches sent and not answered within the deadline (refused ones excluded:
        nothing listened yet, and a client learns that at once)."""
        return sum(1 for p in self.probes if p.outcome not in ("200", "refused"))

    @property
    def longest_without_answer(self) -> float:
        """The longest time, from the phase's start on, between two answered searches."""
        longest, last = 0.0, 0.0
        for probe in self.probes:
            if probe.outcome == "200":
                answered = probe.sent + probe.ms / 1000
                longest, last = max(longest, answered - last), answered
        return longest


class Command(BaseCommand):
    help = "Time make run's first answered search after a start and after worker restarts."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=2_000, help="memories of the owner")
        parser.add_argument("--restarts", type=int, default=3, help="worker restarts measured")
        parser.add_argument(
            "--signal",
            choices=("TERM", "KILL"),
            default="TERM",
            help="how the workers are stopped: TERM (graceful, they finish what they accepted) "
            "or KILL (a crash)",
        )
        parser.add_argument(
            "--deadline", type=float, default=0.5, help="the client's deadline per search (s)"
        )
        parser.add_argument(
            "--web-workers",
            type=int,
            default=settings.WEB_WORKERS,
            help="gunicorn worker processes, as make run (default 2)",
        )
        parser.add_argument("--database", default="timothy_cold", help="scratch database name")
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--reuse", action="store_true", help="reuse a kept scratch database")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED)

    def handle(self, *args, **options) -> None:
        if settings.EMBEDDING_PROVIDER == "none":
            raise CommandError("No embedding provider: there is no model to load.")
        database = options["database"]
        filled = options["reuse"] and database_exists(database)
        try:
            with scratch_database(database, keep=options["keep"], reuse=options["reuse"]):
                if not filled:
                    filler = BenchRecall(stdout=self.stdout, stderr=self.stderr)
                    synthesizer = Synthesizer(options["seed"], settings.EMBEDDING_DIMENSIONS)
                    filler._fill(synthesizer, 1, options["memories"])
                owner = get_user_model().objects.get(username=f"{BENCH_OWNER_PREFIX}0")
                token = ApiToken.issue(owner, "cold start")[1]
                connections.close_all()
                phases = self._run(scratch_database_url(database), token, options)
        except ScratchRefused as refused:
            raise CommandError(str(refused))
        self._report(phases, options)
        if not options["keep"]:
            self.stdout.write(f"dropped scratch database {database}")
        if any(phase.first_answer is None for phase in phases):
            raise CommandError("The site never answered a search within the deadline.")

    def _run(self, url: str, token: str, options) -> list[Phase]:
        env = service_env(
            settings.DATA_DIR,
            DATABASE_URL=url,
            TIMOTHY_EMBEDDING_PROVIDER=settings.EMBEDDING_PROVIDER,
            TIMOTHY_WEB_WORKERS=str(options["web_workers"]),
            TIMOTHY_WORKERS=str(settings.Q_CLUSTER["workers"]),
        )
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"
        self.load_before = os.getloadavg()
        started = time.monotonic()
        service = ServeProcess(env)
        phases = []
        try:
            phases.append(Phase("start", self._probe(service, session, started, options)))
            for number in range(1, options["restarts"] + 1):
                workers = self._public_workers(service)
                started = time.monotonic()
                for worker in workers:
                    worker.send_signal(getattr(signal, f"SIG{options['signal']}"))
                probes = self._probe(service, session, started, options, replaced=workers)
                phases.append(Phase(f"restart {number}", probes, self.old_gone))
        finally:
            self.load_after = os.getloadavg()
            service.stop()
            service.kill(postgres=False)
        return phases

    def _public_workers(self, service: ServeProcess) -> list[psutil.Process]:
        def public(process: psutil.Process) -> bool:
            try:
                return "timothy.wsgi:application" in process.cmdline()
            except psutil.Error:
                return False

        masters = [p for p in service.children() if public(p) and not public(p.parent())]
        if not masters:
            raise CommandError("No gunicorn of the public site found under serve.")
        return [p for p in masters[0].children() if public(p)]

    def _probe(self, service, session, started, options, replaced=()) -> list[Probe]:
        """Searches, one after another, until the vector leg answers."""
        probes: list[Probe] = []
        self.old_gone = None
        deadline = options["deadline"]
        while time.monotonic() - started < GIVE_UP_SECONDS:
            if service.process.poll() is not None:
                raise CommandError(f"serve exited:\n{service.output[-3000:]}")
            sent = time.monotonic()
            try:
                response = session.post(
                    service.base + "/v1/memories/search",
                    json={"query": QUERY},
                    timeout=deadline,
                )
                outcome = str(response.status_code)
            except requests.ConnectionError as error:
                # Refused while nothing listens, or "read timed out" as a ConnectionError.
                outcome = "late" if "timed out" in str(error).lower() else "refused"
                response = None
            except requests.Timeout:
                outcome, response = "late", None
            ms = (time.monotonic() - sent) * 1000
            vector = ""
            if response is not None and response.status_code == 200:
                leg = response.json()["legs"].get("vector", {})
                vector = leg.get("status", "")
                if leg.get("error"):
                    vector += f" ({leg['error']})"
            probes.append(Probe(sent - started, outcome, ms, vector))
            if replaced and self.old_gone is None and not any(_alive(p) for p in replaced):
                self.old_gone = time.monotonic() - started
            if vector == "ok" and not any(_alive(p) for p in replaced):
                break  # the vector leg answers, and no old worker is left to answer
            if outcome == "refused":
                time.sleep(PAUSE_SECONDS)
        return probes

    def _report(self, phases: list[Phase], options) -> None:
        self.stdout.write(
            f"cold start: make run's gunicorn ({options['web_workers']} workers), "
            f"embeddings: {settings.EMBEDDING_PROVIDER}, client deadline "
            f"{options['deadline'] * 1000:.0f} ms per search"
        )
        self.stdout.write(
            f"machine: {os.cpu_count()} cores, load average {self.load_before[0]:.1f} before, "
            f"{self.load_after[0]:.1f} after (1 min)"
        )
        for phase in phases:
            first, vector = phase.first_answer, phase.first_vector
            since = "launch" if phase.name == "start" else f"SIG{options['signal']} to every worker"
            if first is None:
                self.stdout.write(f"{phase.name}: no search answered")
                continue
            self.stdout.write(
                f"{phase.name}: first search answered {first.sent + first.ms / 1000:.2f} s after "
                f"{since} (in {first.ms:.0f} ms, vector leg {first.vector}); vector leg "
                + (
                    f"answering after {vector.sent + vector.ms / 1000:.2f} s"
                    if vector
                    else "never answered"
                )
                + f"; {phase.late} of {len(phase.probes)} searches past the deadline; longest "
                f"without an answer {phase.longest_without_answer:.2f} s"
                + (f"; the old workers gone after {phase.old_gone:.2f} s" if phase.old_gone else "")
            )
            if options["verbosity"] >= 2:
                for probe in phase.probes:
                    self.stdout.write(
                        f"  {probe.sent:7.2f} s  {probe.outcome:8} {probe.ms:6.0f} ms"
                        f"  {probe.vector}"
                    )


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
