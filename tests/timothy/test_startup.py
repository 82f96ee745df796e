"""Importing the settings computes values and nothing else; the start-up step
(timothy/startup.py, run by manage.py) makes the data folder, the secret key
and starts the embedded PostgreSQL, only for commands that use a database."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from timothy.startup import ensure_secret_key, needs_database

ROOT = Path(__file__).resolve().parents[2]
# A bound on a command that must finish by itself; generous, never a measure.
COMMAND_TIMEOUT = 180


def environment(data_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST", "TIMOTHY_"))
    }
    for name in ("DATABASE_URL", "SECRET_KEY"):
        env.pop(name, None)
    env["TIMOTHY_DATA_DIR"] = str(data_dir)
    return env


def run(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=environment(data_dir),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )


def test_it_imports_the_settings_without_touching_anything(tmp_path):
    data_dir = tmp_path / "data"
    script = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'timothy.settings'; "
        "from django.conf import settings; django.setup(); "
        "print(settings.DATABASES['default']['HOST'], settings.EMBEDDED_DATABASE)"
    )
    result = run(data_dir, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(data_dir / "postgres"), "True"]
    assert not data_dir.exists()


def test_it_checks_the_migrations_without_starting_a_database(tmp_path):
    data_dir = tmp_path / "data"
    result = run(data_dir, "manage.py", "makemigrations", "--check", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes detected" in result.stdout
    assert result.stderr == ""
    assert not (data_dir / "postgres").exists()
    # The secret key is made by the start-up step, once.
    assert (data_dir / "secret_key").exists()


def test_it_keeps_one_secret_key_made_once_and_readable_only_by_its_owner(tmp_path):
    path = tmp_path / "data" / "secret_key"
    first = ensure_secret_key(path)
    assert len(first) >= 50
    assert ensure_secret_key(path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_it_starts_the_database_only_for_commands_that_use_it():
    assert needs_database(["manage.py", "migrate"])
    assert needs_database(["manage.py", "createtoken", "owner"])
    assert needs_database(["manage.py", "serve"])
    assert not needs_database(["manage.py", "makemigrations", "--check"])
    assert not needs_database(["manage.py", "check", "--deploy"])
    assert not needs_database(["manage.py"])
    assert not needs_database(["manage.py", "--help"])
