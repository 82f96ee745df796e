"""Asking a command for its help starts no database: ``-h``, ``--help`` and
``help COMMAND`` print the usage and leave no embedded PostgreSQL behind."""

from __future__ import annotations

import pytest

from tests.timothy.test_startup import run
from timothy.database import stop_embedded
from timothy.startup import needs_database

# What is asked, and the command whose usage it prints.
HELP_REQUESTS = [
    (["recall", "--help"], "recall"),
    (["redact", "-h"], "redact"),
    (["migrate", "--no-input", "--help"], "migrate"),
    (["help", "serve"], "serve"),
]


@pytest.mark.parametrize(
    ("request_", "command"), HELP_REQUESTS, ids=[" ".join(r) for r, _ in HELP_REQUESTS]
)
def test_help_starts_no_database(tmp_path, request_, command):
    data_dir = tmp_path / "data"

    try:
        result = run(data_dir, "manage.py", *request_)

        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: manage.py {command} ")
        # The embedded server's data folder is made the first time it starts.
        assert not (data_dir / "postgres").exists()
    finally:
        stop_embedded(data_dir)  # should it have started after all


def test_it_reads_help_as_argparse_does():
    assert not needs_database(["manage.py", "createtoken", "owner", "--help"])
    assert not needs_database(["manage.py", "recall", "-h", "--owner", "x"])
    # After "--" it is an argument, not the option.
    assert needs_database(["manage.py", "recall", "--owner", "x", "--", "-h"])


def test_check_starts_the_database_only_when_told_to_check_one():
    assert not needs_database(["manage.py", "check"])
    assert needs_database(["manage.py", "check", "--database", "default"])
    assert needs_database(["manage.py", "check", "--database=default"])
