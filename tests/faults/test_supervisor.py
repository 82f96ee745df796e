"""`serve` supervises what it starts: a child that dies is restarted (with a
growing pause while it keeps dying), so is the embedded PostgreSQL, and when
serve stops nothing it started is left running."""

from __future__ import annotations

import os
import signal
import time
from io import StringIO

import psutil
import pytest

from memories.management.commands.serve import (
    RESTART_FIRST_SECONDS,
    RESTART_MAX_SECONDS,
    STABLE_SECONDS,
    Backoff,
    Command,
)
from tests.faults.conftest import api, remember
from timothy import database
from timothy.drill import (
    HTTP_TIMEOUT,
    START_TIMEOUT,
    ServeProcess,
    descendants_of_data_dir,
    gone,
    postgres_processes,
    postmaster_pid,
    restart_postgres,
    wait_for,
)


def assert_stops_leaving_nothing(service: ServeProcess) -> None:
    assert service.stop() == 0, service.output
    assert "Stopped." in service.output
    assert not (service.data_dir / "postgres" / "postmaster.pid").exists()
    left = [p for p in descendants_of_data_dir(service.data_dir) if not gone([p.pid])]
    assert left == [], [(p.pid, p.cmdline()) for p in left]


def test_it_restarts_a_killed_worker_and_leaves_nothing_behind(start_service):
    service = start_service()
    worker = service.worker()
    service.wait_for_output(r"Q Cluster \S+ \[timothy\] running")
    # qcluster runs its worker processes as children.
    orphans = [child.pid for child in worker.children(recursive=True)]
    assert orphans

    os.kill(worker.pid, signal.SIGKILL)

    service.wait_for_output(r"The worker was killed by SIGKILL; restarting it in 1 s\.")
    service.wait_for_output(r"Restarted the worker \(pid \d+\)")
    # What the dead worker had started went with it.
    wait_for(lambda: gone(orphans), START_TIMEOUT, "the dead worker's processes to end")
    # The rest of the service never stopped.
    assert remember(service, "Written after the worker died.")["status"] == "active"

    # Dying again soon after its restart: the pause doubles.
    replacement = wait_for(
        lambda: (w := service.worker()).pid != worker.pid and w, START_TIMEOUT, "a new worker"
    )
    os.kill(replacement.pid, signal.SIGKILL)
    service.wait_for_output(r"The worker was killed by SIGKILL; restarting it in 2 s\.")
    service.wait_for_output(r"(?s)Restarted the worker.*Restarted the worker")

    assert_stops_leaving_nothing(service)


def test_it_restarts_the_public_site_when_it_crashes(start_service):
    service = start_service()
    site = next(p for p in service.children() if "timothy.wsgi:application" in p.cmdline())
    web_workers = [child.pid for child in site.children()]

    os.kill(site.pid, signal.SIGKILL)

    service.wait_for_output(r"The public site was killed by SIGKILL; restarting it in 1 s\.")
    wait_for(lambda: gone(web_workers), START_TIMEOUT, "the old web workers to end")
    wait_for(service.answers, START_TIMEOUT, "the site to answer again")
    assert remember(service, "Written after the site came back.")["status"] == "active"
    assert_stops_leaving_nothing(service)


def test_it_starts_postgres_again_when_it_dies(start_service):
    service = start_service()
    kept = remember(service, "Written before PostgreSQL died.")
    old = postgres_processes(service.data_dir)

    os.kill(postmaster_pid(service.data_dir), signal.SIGKILL)

    service.wait_for_output("The embedded PostgreSQL runs again")
    wait_for(lambda: gone([p.pid for p in old]), START_TIMEOUT, "the old PostgreSQL to end")
    session = api(service)
    wait_for(
        lambda: session.get(service.base + "/v1/memories", timeout=HTTP_TIMEOUT).status_code == 200,
        START_TIMEOUT,
        "the API to answer again",
    )
    listed = session.get(service.base + "/v1/memories", timeout=HTTP_TIMEOUT).json()
    assert kept["id"] in [memory["id"] for memory in listed["memories"]]
    assert_stops_leaving_nothing(service)


def test_it_stops_a_postgres_restarted_underneath_it(start_service):
    service = start_service()
    before = postmaster_pid(service.data_dir)

    restart_postgres(service.data_dir)

    after = wait_for(
        lambda: (pid := postmaster_pid(service.data_dir)) != before and pid,
        START_TIMEOUT,
        "a new postmaster",
    )
    assert after

    def written():
        # The new postmaster writes its pid file before it accepts connections:
        # until then the service answers 503, as it should.
        response = api(service).post(
            service.base + "/v1/memories",
            json={"content": "Written after the restart.", "type": "semantic", "mode": "remember"},
            timeout=HTTP_TIMEOUT,
        )
        if response.status_code == 503:
            return None
        assert response.status_code == 201, response.text
        return response.json()

    assert wait_for(written, START_TIMEOUT, "a write after the restart")["status"] == "active"
    assert_stops_leaving_nothing(service)


@pytest.mark.parametrize(
    ("ran_for", "expected"),
    [
        ([0] * 7, [1, 2, 4, 8, 16, 30, 30]),
        # A run of STABLE_SECONDS or more starts the pauses over.
        ([0, 0, 0, STABLE_SECONDS, 0], [1, 2, 4, 1, 2]),
    ],
)
def test_it_doubles_the_pause_while_a_child_keeps_dying(ran_for, expected):
    backoff = Backoff()
    assert [backoff.next_delay(seconds) for seconds in ran_for] == expected
    assert RESTART_FIRST_SECONDS == 1 and RESTART_MAX_SECONDS == 30


def test_it_says_postgres_runs_again_when_another_process_started_it(tmp_path, settings):
    # Its own start failed (the killed server's processes still held the shared
    # memory) and it waits out the pause; meanwhile the restarted worker's
    # start-up starts the server. The outage has ended all the same.
    settings.DATA_DIR = tmp_path
    database.start_embedded(tmp_path)
    try:
        old = postgres_processes(tmp_path)
        os.kill(postmaster_pid(tmp_path), signal.SIGKILL)
        wait_for(lambda: gone([p.pid for p in old]), START_TIMEOUT, "the old PostgreSQL to end")
        out, err = StringIO(), StringIO()
        supervisor = Command(stdout=out, stderr=err)
        restarts = Backoff()
        restarts.not_before = time.monotonic() + 3600
        restarts.next_delay(ran_for=0)  # what the failed start left

        supervisor.supervise_postgres(restarts)
        assert not database.embedded_running(tmp_path)
        assert out.getvalue() == err.getvalue() == ""

        wait_for(lambda: not psutil.pid_exists(old[0].pid), START_TIMEOUT, "the zombie reaped")
        database.start_embedded(tmp_path)  # the worker's manage.py, say
        supervisor.supervise_postgres(restarts)
        assert out.getvalue() == "The embedded PostgreSQL runs again.\n"
        assert restarts.failures == 0
        assert restarts.not_before == 0.0
        supervisor.supervise_postgres(restarts)  # said once per outage
        assert out.getvalue() == "The embedded PostgreSQL runs again.\n"
    finally:
        database.stop_embedded(tmp_path)


def test_it_says_postgres_runs_again_once_and_only_when_it_does(tmp_path, settings):
    # A killed postmaster stays a zombie until something reaps it (at once
    # under most inits; here, and in a container without --init, later). A
    # start then does nothing: it must not be taken for a server that runs.
    settings.DATA_DIR = tmp_path
    database.start_embedded(tmp_path)
    try:
        killed = postmaster_pid(tmp_path)
        os.kill(killed, signal.SIGKILL)
        wait_for(
            lambda: (
                psutil.Process(killed).status() == psutil.STATUS_ZOMBIE
                if psutil.pid_exists(killed)
                else True
            ),
            START_TIMEOUT,
            "the postmaster to end",
        )
        assert not database.embedded_running(tmp_path)
        out, err = StringIO(), StringIO()
        supervisor = Command(stdout=out, stderr=err)
        restarts = Backoff()

        def supervised() -> bool:
            supervisor.supervise_postgres(restarts)
            if "runs again" in out.getvalue():
                # Said only once a new server answers for the data folder.
                assert database.embedded_running(tmp_path)
                return True
            return False

        wait_for(supervised, START_TIMEOUT, "the supervisor to start PostgreSQL again")
        assert out.getvalue() == "The embedded PostgreSQL runs again.\n"
        assert postmaster_pid(tmp_path) != killed
        waiting = "Could not start it (its last postmaster has ended but is not reaped yet); "
        for line in err.getvalue().splitlines():
            assert line == "The embedded PostgreSQL is not running; starting it again." or (
                line.startswith(waiting + "trying again in")
            ), err.getvalue()
    finally:
        database.stop_embedded(tmp_path)
