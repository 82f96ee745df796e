"""A small run of the load test, so that the command does not rot."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from io import StringIO
from types import SimpleNamespace

import psutil
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from bench.management.commands.bench_load import METER_SAMPLE_SECONDS, CpuMeter
from timothy.scratch import database_exists

SCRATCH = "test_faults_load_smoke"


@pytest.mark.django_db(transaction=True)
def test_it_loads_make_run_and_reports_latency_throughput_and_lost_writes():
    test_database = connection.settings_dict["NAME"]
    out = StringIO()
    call_command(
        "bench_load",
        "--memories",
        "300",
        "--owners",
        "2",
        "--clients",
        "3",
        "--seconds",
        "4",
        "--warmup",
        "1",
        # A busy machine may answer nothing in 4 s: measure on until it has.
        "--min-requests",
        "2",
        "--web-workers",
        "1",
        "--database",
        SCRATCH,
        stdout=out,
    )
    text = out.getvalue()
    assert "filled 600 memories for 2 owner(s)" in text
    assert "600 memories of 2 owner(s)" in text
    assert re.search(r"3 clients for (\d+(\.\d)?) s", text)
    assert float(re.search(r"3 clients for (\S+) s", text).group(1)) >= 4
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
    for kind in ("search", "all"):
        count, p50, p95, p99, slowest = (float(value) for value in rows[kind][:5])
        assert count >= 2
        assert 0 < p50 <= p95 <= p99 <= slowest
    assert "5xx: 0; without an answer: 0" in text
    assert "(none lost)" in text
    cpu = re.search(r"CPU per measured request .*web workers (\S+) ms.*total (\S+) ms", text)
    assert cpu and 0 < float(cpu[1]) < float(cpu[2])
    assert not database_exists(SCRATCH)
    assert connection.settings_dict["NAME"] == test_database


@pytest.mark.django_db
def test_it_refuses_the_services_own_database():
    with pytest.raises(CommandError, match="must not be the service's own"):
        call_command("bench_load", "--database", connection.settings_dict["NAME"])


# A child that uses half a second of its own CPU, then exits; its parent stays.
BURN = "import time\nwhile time.process_time() < 0.5: pass"
PARENT = (
    f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {BURN!r}]); "
    "time.sleep(600)"
)


def test_the_cpu_meter_keeps_the_seconds_of_a_process_that_exits_in_the_window():
    """As a database connection closed past CONN_MAX_AGE does: read only at the
    start and the end, its seconds were lost."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        service = SimpleNamespace(
            process=parent, children=lambda: psutil.Process(parent.pid).children(recursive=True)
        )
        deadline = time.monotonic() + 120
        while not service.children() and time.monotonic() < deadline:
            time.sleep(0.01)
        meter = CpuMeter(service, "no_such_database")
        meter.start()
        while service.children() and time.monotonic() < deadline:
            time.sleep(METER_SAMPLE_SECONDS / 20)
            meter.sample()
        meter.stop()
        assert not service.children(), "the child should have finished its half second"
        assert meter.used["serve, internal listener"] >= 0.25, meter.used
    finally:
        parent.kill()
        parent.wait()
