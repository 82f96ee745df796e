"""A `serve` killed outright (`kill -9`): its children go with it, and the next
serve finds whatever was left, stops it and serves; a serve still running on
the data folder is never joined by a second one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest
import requests
from django.conf import settings

from memories.management.commands.serve import (
    leftovers,
    stop_leftovers,
)
from tests.faults.conftest import remember
from timothy.drill import (
    BASE_DIR,
    HTTP_TIMEOUT,
    START_TIMEOUT,
    ServeProcess,
    descendants_of_data_dir,
    gone,
    wait_for,
)


def service_processes(service: ServeProcess) -> list[psutil.Process]:
    """Every process of the data folder but PostgreSQL's (which the next serve
    adopts) and the serve under test itself."""
    postgres = {"postgres", "postmaster"}
    found = []
    for process in descendants_of_data_dir(service.data_dir):
        try:
            if (
                process.pid != service.process.pid
                and process.name() not in postgres
                and process.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def descends_from(process: psutil.Process, ancestor: int) -> bool:
    """Whether ``ancestor`` is among the process's parents; a process that has
    ended meanwhile is nobody's stray."""
    try:
        return any(parent.pid == ancestor for parent in process.parents())
    except psutil.NoSuchProcess:
        return True


def qclusters(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The django-q2 clusters among ``processes``: each one's main process (its
    own processes are forks of it, with its command line)."""

    def is_qcluster(process: psutil.Process) -> bool:
        try:
            return process.cmdline()[-1:] == ["qcluster"]
        except psutil.Error:
            return False

    return [p for p in processes if is_qcluster(p) and not is_qcluster(p.parent())]


def kill_supervisor(service: ServeProcess) -> None:
    os.kill(service.process.pid, signal.SIGKILL)
    service.process.wait()


def search(service: ServeProcess, token: str) -> list[dict]:
    response = requests.post(
        service.base + "/v1/memories/search",
        json={"query": "Which seat do I like on long flights?"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=HTTP_TIMEOUT,
    )
    assert response.status_code == 200, response.text
    return response.json()["memories"]


def assert_serves_alone(second: ServeProcess, token: str) -> None:
    """The second serve answers a search, and every process of the data folder
    (PostgreSQL's aside) is its own: one worker cluster, one pair of gunicorns."""
    second.wait_until_serving()
    second.wait_for_output(r"Q Cluster \S+ \[timothy\] running")
    found = search(second, token)
    assert [m["content"] for m in found][:1] == ["Prefers a window seat on long flights."]
    running = service_processes(second)
    # Whose a process is, asked of each one: a worker the second serve forks
    # after a snapshot of its children (gunicorn or django-q replacing one) is
    # its own too.
    strays = [p for p in running if not descends_from(p, second.process.pid)]
    assert strays == [], [p.cmdline() for p in strays]
    assert len(qclusters(running)) == 1
    own = psutil.Process(second.process.pid).children()
    masters = [p for p in own if "gunicorn" in p.cmdline()]
    assert len(masters) == 2, [p.cmdline() for p in masters]


def test_a_killed_serve_takes_its_children_with_it(start_service):
    first = start_service()
    first.wait_for_output(r"Q Cluster \S+ \[timothy\] running")
    remember(first, "Prefers a window seat on long flights.")
    children = [p.pid for p in first.children()]
    assert len(qclusters(first.children())) == 1
    assert len(children) >= 6  # two gunicorns with a worker each, qcluster and its own
    # The background worker yields the cores to the web workers (WORKER_NICENESS).
    own_priority = psutil.Process(first.process.pid).nice()
    for process in first.children():
        background = "qcluster" in process.cmdline()
        expected = min(19, own_priority + settings.WORKER_NICENESS) if background else own_priority
        assert process.nice() == expected, process.cmdline()

    kill_supervisor(first)

    wait_for(lambda: gone(children), START_TIMEOUT, "the dead serve's children to end")
    second = ServeProcess(first.env)
    try:
        assert_serves_alone(second, first.owner_token)
        # Nothing was left for it to stop.
        assert "An earlier serve" not in second.output
        assert second.stop() == 0, second.output
    finally:
        second.kill()


def test_the_next_serve_stops_what_a_killed_one_left(start_service):
    # Children that cannot act on the signal their dead parent sent (stopped
    # here; elsewhere a kernel without it, or a child that ignores SIGTERM)
    # still hold the ports and the queue when the next serve starts.
    first = start_service()
    first.wait_for_output(r"Q Cluster \S+ \[timothy\] running")
    remember(first, "Prefers a window seat on long flights.")
    groups = [p.pid for p in psutil.Process(first.process.pid).children()]
    assert len(groups) == 3
    for group in groups:
        os.killpg(group, signal.SIGSTOP)
    left = [p.pid for p in first.children()]
    kill_supervisor(first)
    assert not gone(left)

    second = ServeProcess(first.env)
    try:
        second.wait_for_output(
            rf"An earlier serve \(pid {first.process.pid}\) had died and left its public "
            r"site, internal listener and worker running \(\d+ processes\); stopped them"
        )
        assert gone(left)
        assert_serves_alone(second, first.owner_token)
        assert second.stop() == 0, second.output
    finally:
        second.kill()


def test_a_second_serve_on_a_running_one_refuses_in_one_sentence(start_service):
    first = start_service()
    second = subprocess.run(
        [sys.executable, "manage.py", "serve"],
        cwd=BASE_DIR,
        env=first.env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )
    assert second.returncode == 1, second.stdout + second.stderr
    assert second.stderr.strip().splitlines()[-1] == (
        f"CommandError: serve is already running on {first.data_dir} as pid "
        f"{first.process.pid}; stop it first (Ctrl-C in its terminal, or kill "
        f"{first.process.pid}), or give this one another TIMOTHY_DATA_DIR."
    )
    assert "Traceback" not in second.stderr
    # The first one never noticed.
    assert remember(first, "Written after the refusal.")["status"] == "active"
    assert first.process.poll() is None


@pytest.fixture
def group():
    """Start a process leading a group of its own (as serve's children do)."""
    started: list[subprocess.Popen] = []

    def start(code: str, **popen) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, **popen)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


SLEEPS = "import time; time.sleep(600)"
IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + (
    "print('ready', flush=True); time.sleep(600)"
)


def test_a_recorded_group_is_found_only_if_it_started_after_the_record(group):
    process = group(SLEEPS)
    started = psutil.Process(process.pid).create_time()
    assert [p.pid for p in leftovers({"pid": process.pid, "started": started})] == [process.pid]
    # A pid reused by a process started before the record is not the child.
    assert leftovers({"pid": process.pid, "started": started + 3600}) == []
    assert leftovers({"pid": "x"}) == []


def test_leftovers_are_stopped_with_sigterm_then_sigkill(group):
    polite = group(SLEEPS)
    stubborn = group(IGNORES_SIGTERM, stdout=subprocess.PIPE)
    frozen = group(SLEEPS)
    assert stubborn.stdout.readline().strip() == b"ready"
    os.kill(frozen.pid, signal.SIGSTOP)
    record = {
        "pid": 1,
        "children": [
            {"name": name, "pid": p.pid, "started": psutil.Process(p.pid).create_time()}
            for name, p in (("a", polite), ("b", stubborn), ("c", frozen))
        ],
    }

    found, killed = stop_leftovers(record)

    assert [child["name"] for child, _ in found] == ["a", "b", "c"]
    assert killed == 1
    # All ended (stop_leftovers reaped them: psutil waits on its children),
    # the one that ignores SIGTERM by SIGKILL, the stopped one once continued.
    assert gone([polite.pid, stubborn.pid, frozen.pid])
