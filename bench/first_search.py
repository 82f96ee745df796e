"""From a fresh clone to the first answered search with `make run`.

    python3 bench/first_search.py [--runs 3] [--keep] [--makefile PATH]

Clones this repository's committed HEAD into a temporary folder (nothing of
this working tree's .venv or data folder comes along), runs `make run` there
on free ports with its own data folder, and times from the start to: the
runtime installed (make's `touch .venv/.runtime-installed`), the service
serving (serve's "Serving http://" line), and the first
`POST /v1/memories/search` answered 200 (polled every 0.1 s with the API token
the first run prints). Then stops the whole process group with SIGINT (as
Ctrl-C would) and removes the clone. pip's cache is whatever the machine has:
warm when anything installed the same pins before. ``--makefile`` copies that
Makefile over the clone's (to time a change before it is committed). Uses the
standard library only: it runs before any virtualenv exists. The load average
is printed with each run, since installing is most of the time and moves
with it. docs/benchmarks.md ("Install size and the first search") has the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
GIVE_UP_SECONDS = 600


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def search(base: str, token: str) -> int:
    request = urllib.request.Request(
        base + "/v1/memories/search",
        data=json.dumps({"query": "what do I like?"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, urllib.error.URLError):
        return 0


def one_run(makefile: Path | None, keep: bool, show: bool = False) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="timothy-fresh-"))
    clone = folder / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(REPOSITORY), str(clone)], check=True, capture_output=True
    )
    if makefile is not None:
        shutil.copy(makefile, clone / "Makefile")
    public, internal = free_port(), free_port()
    env = dict(
        os.environ,
        TIMOTHY_DATA_DIR=str(clone / ".data"),
        TIMOTHY_PUBLIC_ADDR=f"127.0.0.1:{public}",
        TIMOTHY_INTERNAL_ADDR=f"127.0.0.1:{internal}",
        PYTHONUNBUFFERED="1",
    )
    for name in ("DATABASE_URL", "VIRTUAL_ENV", "TIMOTHY_TEST_DB"):
        env.pop(name, None)
    load = os.getloadavg()[0]
    started = time.monotonic()
    process = subprocess.Popen(
        ["make", "run"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    marks: dict[str, float] = {}
    token: list[str] = []
    log: list[str] = []

    def read() -> None:
        for line in process.stdout:
            now = time.monotonic() - started
            log.append(f"{now:7.1f} s  {line}")
            if "touch .venv/.runtime-installed" in line:
                marks.setdefault("installed", now)
            elif "Serving http://" in line:
                marks.setdefault("serving", now)
            found = re.search(r"API token: (\S+)", line)
            if found:
                token.append(found[1])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{public}"
    try:
        while time.monotonic() - started < GIVE_UP_SECONDS:
            if process.poll() is not None:
                raise RuntimeError("make run exited:\n" + "".join(log[-30:]))
            if token and search(base, token[0]) == 200:
                marks["answered"] = time.monotonic() - started
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("no search answered in time:\n" + "".join(log[-30:]))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    if show:
        print("".join(log), end="")
    marks["load"] = load
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the clones")
    parser.add_argument("--makefile", type=Path, help="use this Makefile in the clone")
    parser.add_argument("--show", action="store_true", help="print make run's output, timed")
    options = parser.parse_args()
    answered = []
    for number in range(1, options.runs + 1):
        marks = one_run(options.makefile, options.keep, options.show)
        answered.append(marks["answered"])
        print(
            f"run {number}: load {marks['load']:.1f} at start; installed "
            f"{marks.get('installed', float('nan')):.1f} s, serving "
            f"{marks.get('serving', float('nan')):.1f} s, first search answered "
            f"{marks['answered']:.1f} s",
            flush=True,
        )
    print(f"median of {len(answered)}: first search answered {statistics.median(answered):.1f} s")
    sys.exit(0)


if __name__ == "__main__":
    main()
