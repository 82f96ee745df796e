"""A small run of the load test, so that the command does not rot."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

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
