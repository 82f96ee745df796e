"""``manage.py check --database default`` with the server out of reach says so
in a warning: silence would read as "the retrieval index is fine"."""

from __future__ import annotations

from tests.timothy.test_settings import manage_check


def test_the_check_warns_when_the_database_cannot_be_reached():
    # manage_check names a server nobody runs (DATABASE_URL on port 9).
    result = manage_check("--database", "default")

    assert "Traceback" not in result.stderr
    # A warning, not an error: the command still succeeds.
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stderr.splitlines() if "retrieval.W006" in line]
    assert line.startswith(
        "?: (retrieval.W006) The retrieval index was not checked: the PostgreSQL server "
        "cannot be reached ("
    )
    assert line.endswith(").")
    assert "127.0.0.1" in line


def test_the_plain_check_still_looks_at_no_database():
    result = manage_check()

    assert result.returncode == 0, result.stderr
    assert "retrieval.W006" not in result.stdout + result.stderr
