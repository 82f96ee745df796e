"""bench_search --busy: the other work it starts runs, takes a core each and is gone after."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from bench.busy import BusyProcesses, busy

TINY_EVAL = Path(__file__).resolve().parents[1] / "evaluation" / "tiny-eval.json"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_busy_processes_use_cpu_and_are_stopped_after_the_block():
    with busy(2) as others:
        assert len(others.processes) == 2
        time.sleep(1.5)
        share = others.cpu_share()
        pids = [process.pid for process in others.processes]
        assert all(alive(pid) for pid in pids)
    # Steady work: a good part of a core each, even on a shared machine.
    assert share is not None and share > 0.2
    assert not any(alive(pid) for pid in pids)


def test_busy_processes_are_stopped_when_the_block_raises():
    with pytest.raises(KeyboardInterrupt), busy(1) as others:
        pid = others.processes[0].pid
        raise KeyboardInterrupt
    assert not alive(pid)


def test_no_busy_processes_for_zero():
    with busy(0) as others:
        assert others is None


def test_a_busy_process_ends_by_itself_once_its_starter_is_gone():
    # A starter killed outright (no finally runs) must not leave its work behind.
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from bench.busy import BusyProcesses; b = BusyProcesses(1); b.start();"
            "print(b.processes[0].pid, flush=True); time.sleep(60)",
            str(Path(__file__).resolve().parents[2]),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(starter.stdout.readline())
    assert alive(pid)
    starter.kill()
    starter.wait()
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pid)


def test_cpu_share_counts_only_since_the_start():
    others = BusyProcesses(1)
    try:
        others.start()
        time.sleep(0.5)
        assert 0 < others.cpu_share() <= 1.2 * (os.cpu_count() or 1)
    finally:
        others.stop()


@pytest.mark.django_db
def test_bench_search_refuses_a_negative_busy():
    with pytest.raises(CommandError, match="--busy takes"):
        call_command("bench_search", "--busy", "-1", "--database", "h_unused_scratch")


def busy_children() -> list[int]:
    """This process's children running the busy loop."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and b"parent = int" in command:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_bench_search_says_it_was_busy_and_leaves_nothing_running():
    out = StringIO()
    call_command(
        "bench_search",
        "--memories",
        "30",
        "--queries",
        "4",
        "--concurrency",
        "1",
        "--web-workers",
        "1",
        "--dataset",
        str(TINY_EVAL),
        "--database",
        "test_bench_search_busy_smoke",
        "--busy",
        "2",
        stdout=out,
    )
    text = out.getvalue()
    assert "BUSY: 2 other process(es) keep a core busy each" in text, text
    assert re.search(r"BUSY: each other process had \d+% of a core", text), text
    assert "concurrency 1 (BUSY: 2 other processes), where the time went" in text
    assert busy_children() == []


def test_the_fill_stores_what_each_memory_is_about_as_an_import_does():
    from types import SimpleNamespace

    from bench.management.commands.bench_search import (
        ABOUT_COLUMNS,
        FILL_COLUMNS,
        FILL_TYPES,
        Command,
        PersonalCorpus,
    )
    from memories.about import SET_BY_RULES, derive_about

    assert FILL_COLUMNS.count(",") + 1 == len(FILL_TYPES)
    corpus = PersonalCorpus([TINY_EVAL], seed=5)
    owner = SimpleNamespace(pk=7, username="bench-search-owner", first_name="")
    owner.get_full_name = lambda: ""
    rows = [row for batch in Command._batches(corpus, owner, 12) for row in batch]
    assert len(rows) == 12
    for row in rows:
        about = dict(zip(ABOUT_COLUMNS, row[-len(ABOUT_COLUMNS) :], strict=True))
        assert about["about_kind"] and about["about_set_by"] == SET_BY_RULES
        derived = derive_about(row[2], row[1], entities=tuple(row[4]), written=row[9])
        assert (about["about_subject"], about["about_kind"]) == (derived.subject, derived.kind)
