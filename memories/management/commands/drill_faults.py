"""Fault drill: inject each fault of docs/reliability.md into a real service and
measure how long requests take to be answered during it and to succeed again after.

Runs ``manage.py serve`` on a temporary data folder (its own embedded
PostgreSQL, free ports, no embedding provider), keeps a few clients searching
and writing throughout, and for each fault prints what the requests sent
during it got and how fast, and when the first success came after the fault
ended. At the end it checks every acknowledged write against the rows. The
tests in tests/faults/ assert the behaviour; this command only measures it.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psycopg
import requests
from django.core.management.base import BaseCommand

from memories.management.commands.serve import STABLE_SECONDS
from timothy.drill import (
    HTTP_TIMEOUT,
    ServeProcess,
    freeze,
    postgres_processes,
    postmaster_pid,
    service_env,
    thaw,
    wait_for,
)

# Seconds between two requests of one client (so the server is busy, not flooded).
PAUSE = 0.05
# Requests that need no database, sent alongside the API clients.
NO_DATABASE_PATHS = ("/static/css/timothy.css", "/api/schema/", "/login/")


@dataclass
class Sent:
    kind: str
    started: float
    ms: float
    status: int | str
    content: str = ""


class Traffic:
    """Clients searching and writing (and fetching pages that need no database)
    until stopped; every request is recorded with when it was sent."""

    def __init__(self, service: ServeProcess, clients: int) -> None:
        self.service = service
        self.sent: list[Sent] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._client, args=(n,), daemon=True) for n in range(clients)
        ]
        self.threads.append(threading.Thread(target=self._no_database, daemon=True))

    def start(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=HTTP_TIMEOUT + 10)

    def _record(self, kind: str, call, content: str = "") -> None:
        started = time.monotonic()
        try:
            status: int | str = call().status_code
        except requests.RequestException as error:
            status = type(error).__name__
        with self.lock:
            self.sent.append(
                Sent(kind, started, (time.monotonic() - started) * 1000, status, content)
            )

    def _client(self, number: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.service.owner_token}"
        base = self.service.base
        count = 0
        while not self.stopping.is_set():
            count += 1
            if count % 4:
                self._record(
                    "search",
                    lambda: session.post(
                        base + "/v1/memories/search", json={"query": "tea"}, timeout=HTTP_TIMEOUT
                    ),
                )
            else:
                content = f"Drill client {number} wrote fact {count} about tea."
                body = {"content": content, "type": "semantic", "mode": "remember"}
                self._record(
                    "write",
                    lambda body=body: session.post(
                        base + "/v1/memories", json=body, timeout=HTTP_TIMEOUT
                    ),
                    content,
                )
            time.sleep(PAUSE)

    def _no_database(self) -> None:
        base = self.service.base
        while not self.stopping.is_set():
            for path in NO_DATABASE_PATHS:
                self._record(
                    "no database", lambda path=path: requests.get(base + path, timeout=HTTP_TIMEOUT)
                )
            time.sleep(PAUSE)

    def between(self, start: float, end: float, kinds: tuple[str, ...]) -> list[Sent]:
        with self.lock:
            return [s for s in self.sent if start <= s.started < end and s.kind in kinds]

    def first_success_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the answer of the first API request sent after it
        that succeeded."""
        with self.lock:
            done = [
                s.started + s.ms / 1000
                for s in self.sent
                if s.started >= moment and s.kind != "no database" and s.status in (200, 201)
            ]
        return min(done) - moment if done else None


class Command(BaseCommand):
    help = "Inject faults into a real service and measure time to answer and to recover."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--clients", type=int, default=4, help="API clients")
        parser.add_argument(
            "--freeze-seconds", type=float, default=20.0, help="how long each freeze lasts"
        )
        parser.add_argument("--repeat", type=int, default=3, help="runs of each fault")

    def handle(self, *args, **options) -> None:
        folder = Path(tempfile.mkdtemp(prefix="timothy-drill-"))
        # The clients share one token: lift its rate limit, which is not under test.
        service = ServeProcess(
            service_env(folder / "data", TIMOTHY_RATE_LIMIT_PER_MINUTE="1000000")
        )
        try:
            service.wait_until_serving()
            self.stdout.write(
                f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
                f"{options['clients']} API clients (3 searches, 1 write), 1 client of "
                "static file / schema / login page"
            )
            traffic = Traffic(service, options["clients"]).start()
            wait_for(lambda: len(traffic.sent) > 20, HTTP_TIMEOUT, "traffic")
            for run in range(1, options["repeat"] + 1):
                self.freeze(service, traffic, options["freeze_seconds"], run)
            for run in range(1, options["repeat"] + 1):
                self.kill_postgres(service, traffic, run)
            for run in range(1, options["repeat"] + 1):
                self.kill_child(service, traffic, "worker", run)
            for run in range(1, options["repeat"] + 1):
                self.kill_child(service, traffic, "public site", run)
            traffic.stop()
            self.check_writes(service, traffic)
            self.stdout.write(f"load average at the end: {os.getloadavg()[0]:.1f}")
        finally:
            service.stop()
            service.kill()
            shutil.rmtree(folder, ignore_errors=True)

    # --- faults ---------------------------------------------------------------------------

    def freeze(self, service: ServeProcess, traffic: Traffic, seconds: float, run: int) -> None:
        began = time.monotonic()
        pids = freeze(service.data_dir)
        time.sleep(seconds)
        thawed = time.monotonic()
        thaw(service.data_dir)
        wait_for(lambda: traffic.first_success_after(thawed) is not None, 120, "recovery")
        self.stdout.write(
            f"frozen database, run {run} (SIGSTOP on {len(pids)} processes for {seconds:g} s):"
        )
        self.describe(traffic, began, thawed)
        self.stdout.write(
            f"  first success {traffic.first_success_after(thawed):.2f} s after SIGCONT"
        )

    def kill_postgres(self, service: ServeProcess, traffic: Traffic, run: int) -> None:
        processes = len(postgres_processes(service.data_dir))
        restarts_before = service.output.count("The embedded PostgreSQL runs again")
        killed = time.monotonic()
        os.kill(postmaster_pid(service.data_dir), signal.SIGKILL)
        wait_for(
            lambda: service.output.count("The embedded PostgreSQL runs again") > restarts_before,
            120,
            "PostgreSQL to run again",
        )
        restarted = time.monotonic()
        wait_for(lambda: traffic.first_success_after(killed) is not None, 120, "recovery")
        self.stdout.write(
            f"PostgreSQL killed, run {run} (kill -9 on the postmaster of {processes} processes):"
        )
        self.describe(traffic, killed, restarted)
        self.stdout.write(
            f"  serve had it running again (crash recovery done) {restarted - killed:.2f} s "
            f"after the kill; first success {traffic.first_success_after(killed):.2f} s after it"
        )

    def kill_child(self, service: ServeProcess, traffic: Traffic, name: str, run: int) -> None:
        marker = {"worker": "qcluster", "public site": "timothy.wsgi:application"}[name]
        victim = next(p for p in service.children() if marker in " ".join(p.cmdline()))
        restarts_before = service.output.count(f"Restarted the {name}")
        killed = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        wait_for(
            lambda: service.output.count(f"Restarted the {name}") > restarts_before,
            120,
            f"the {name} to restart",
        )
        restarted = time.monotonic()
        if name == "public site":
            wait_for(lambda: traffic.first_success_after(restarted) is not None, 120, "recovery")
        self.stdout.write(f"{name} killed, run {run} (kill -9):")
        self.describe(traffic, killed, restarted)
        back = ""
        if name == "public site":
            answered = restarted - killed + traffic.first_success_after(restarted)
            back = f"; first success after the restart {answered:.2f} s after the kill"
        self.stdout.write(f"  restarted {restarted - killed:.2f} s after the kill{back}")
        # The next run measures a first restart again, not the doubled pause of a
        # child that keeps dying (that one is tested).
        time.sleep(max(0.0, STABLE_SECONDS - (time.monotonic() - restarted)) + 1)

    # --- reports --------------------------------------------------------------------------

    def describe(self, traffic: Traffic, start: float, end: float) -> None:
        for label, kinds in (("API", ("search", "write")), ("no database", ("no database",))):
            sent = traffic.between(start, end, kinds)
            if not sent:
                continue
            statuses = Counter(s.status for s in sent)
            times = sorted(s.ms / 1000 for s in sent)
            self.stdout.write(
                f"  {label}: {len(sent)} sent during it, "
                + ", ".join(f"{status} {n}" for status, n in sorted(statuses.items(), key=str))
                + f"; answered in median {statistics.median(times):.2f} s, "
                f"at most {times[-1]:.2f} s"
            )

    def check_writes(self, service: ServeProcess, traffic: Traffic) -> None:
        acknowledged = {s.content for s in traffic.sent if s.kind == "write" and s.status == 201}
        with psycopg.connect(
            host=str(service.data_dir / "postgres"), dbname="timothy", user="postgres"
        ) as db:
            stored = {
                row[0]
                for row in db.execute(
                    "SELECT content FROM memories_memory WHERE content LIKE 'Drill client %%'"
                )
            }
        lost = acknowledged - stored
        answered_otherwise = Counter(
            s.status for s in traffic.sent if s.kind == "write" and s.status != 201
        )
        self.stdout.write(
            f"writes: {len(acknowledged)} acknowledged, {len(acknowledged & stored)} of them in "
            f"the database, {len(lost)} lost; {len(stored - acknowledged)} stored without an "
            "acknowledgement (answered "
            + (", ".join(f"{k} {v}" for k, v in answered_otherwise.items()) or "nothing else")
            + ")"
        )
