"""Commands run before the first `make run` (no tables yet), or after an
upgrade that brought migrations, stop with one sentence saying what to run:
never a traceback, never a half-done change."""

from __future__ import annotations

import subprocess
import sys

import pytest

from timothy.database import stop_embedded
from timothy.drill import BASE_DIR, service_env

# A bound on a command that must finish by itself; generous, never a measure.
COMMAND_TIMEOUT = 180

COMMANDS_NEEDING_THE_SCHEMA = [
    ["createtoken", "owner"],
    ["recall", "--owner", "owner", "Which seat do I like?"],
    ["import_memories", "memories.jsonl", "--owner", "owner"],
    ["export_memories", "--owner", "owner"],
    ["reembed", "--missing-only"],
    ["consolidate"],
    ["redact", "1", "--owner", "owner", "--reason", "a test"],
    ["find_entities"],
]


@pytest.fixture(scope="module")
def fresh_data_dir(tmp_path_factory):
    """A data folder whose embedded PostgreSQL has never been migrated."""
    data_dir = tmp_path_factory.mktemp("fresh") / "data"
    yield data_dir
    stop_embedded(data_dir)


def manage(data_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=service_env(data_dir, TIMOTHY_EMBEDDING_PROVIDER="local"),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )


@pytest.mark.parametrize("command", COMMANDS_NEEDING_THE_SCHEMA, ids=lambda c: c[0])
def test_it_says_what_to_run_before_the_first_make_run(fresh_data_dir, command):
    result = manage(fresh_data_dir, *command)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [message] = result.stderr.strip().splitlines()
    assert message == (
        "CommandError: The database has no tables yet: run `make run` once first (it "
        "creates them and the owner account), or `.venv/bin/python manage.py migrate`."
    )


def test_it_says_to_migrate_when_the_schema_is_behind(tmp_path):
    data_dir = tmp_path / "data"
    try:
        migrated = manage(data_dir, "migrate", "--no-input", "-v", "0")
        assert migrated.returncode == 0, migrated.stderr
        unapplied = manage(data_dir, "migrate", "memories", "0004", "--no-input", "-v", "0")
        assert unapplied.returncode == 0, unapplied.stderr

        result = manage(data_dir, "createtoken", "owner")

        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        [message] = result.stderr.strip().splitlines()
        assert "migration(s) behind this version" in message
        assert "manage.py migrate" in message
        # And once migrated, the command does its work.
        assert manage(data_dir, "migrate", "--no-input", "-v", "0").returncode == 0
        created = manage(data_dir, "createtoken", "owner")
        assert created.returncode == 0, created.stderr
        assert created.stdout.strip().splitlines()[-1].startswith("tm_")
    finally:
        stop_embedded(data_dir)
