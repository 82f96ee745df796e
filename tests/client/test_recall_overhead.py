"""The overhead benchmark runs against a real service and prints its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "client" / "benchmarks" / "recall_overhead.py"


def test_it_prints_the_medians_and_the_overhead(timothy):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "5", "--warmup", "2", "--seed", "3"],
        env={"TIMOTHY_URL": timothy.public_url, "TIMOTHY_TOKEN": timothy.token, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("recall overhead: 5 calls of each kind")
    for name in ("bare requests POST + json", "client, no deadline thread", "Memory.recall"):
        assert re.search(
            rf"{re.escape(name)} +median +\d+\.\d+ ms +p95 +\d+\.\d+ ms", result.stdout
        )
    assert re.search(r"overhead of Memory.recall +median +[+-]\d+\.\d+ ms per call", result.stdout)
