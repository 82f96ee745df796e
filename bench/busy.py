"""Other work on the machine, on purpose: processes that keep a core busy while a
benchmark measures (``bench_search --busy N``).

Each process is a fresh Python, at the niceness of the command that starts it
(the service under test starts from the same command, so they are equals for
the scheduler), doing what an evaluation run beside the service does: small
matrix products over sentence-sized vectors with numpy on one thread, and the
pure-Python bookkeeping around them. Its CPU use is steady (one core's worth,
whatever the other processes do) and it asks nothing of PostgreSQL or the disk.

A process ends when it is told to (SIGTERM), on Ctrl-C (it shares the
terminal's process group) and by itself once the process that started it is
gone, so an interrupted benchmark leaves nothing running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STOP_SECONDS = 5
# One step: a batch of 32 sentence vectors (384-d) through a 384 × 384 layer, then
# a little Python over the result: about a millisecond of one core.
STEP = """
import os, sys, time
import numpy as np
parent = int(sys.argv[1])
rng = np.random.default_rng(os.getpid())
layer = rng.standard_normal((384, 384)).astype(np.float32)
batch = rng.standard_normal((32, 384)).astype(np.float32)
steps = 0
while True:
    out = np.tanh(batch @ layer)
    norms = [sum(v * v for v in row[:48].tolist()) for row in out]
    batch = out / (1.0 + max(norms))
    steps += 1
    if steps % 2000 == 0 and os.getppid() != parent:
        break
"""


class BusyProcesses:
    """``count`` processes each keeping one core busy, until ``stop()``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.processes: list[subprocess.Popen] = []
        self.started = 0.0
        self._cpu_start: list[float] = []

    def start(self) -> None:
        # One thread each: a busy process is one core's worth of other work.
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        for _ in range(self.count):
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", STEP, str(os.getpid())],
                    cwd=Path(__file__).resolve().parent,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        self.started = time.monotonic()
        self._cpu_start = [_cpu_seconds(process.pid) or 0.0 for process in self.processes]

    def cpu_share(self) -> float | None:
        """The share of one core each process has had since it started (the mean)."""
        seconds = time.monotonic() - self.started
        if not self.processes or seconds <= 0:
            return None
        used = [
            (_cpu_seconds(process.pid) or 0.0) - start
            for process, start in zip(self.processes, self._cpu_start, strict=True)
        ]
        return sum(used) / len(used) / seconds

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = []


@contextlib.contextmanager
def busy(count: int) -> Iterator[BusyProcesses | None]:
    """``count`` busy processes for the block's length (none for 0), stopped
    however the block ends."""
    if count <= 0:
        yield None
        return
    processes = BusyProcesses(count)
    try:
        processes.start()
        yield processes
    finally:
        processes.stop()


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process, from /proc (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
