"""The embedded PostgreSQL starts with our settings (shared buffers sized for
the machine, or TIMOTHY_PG_SHARED_BUFFERS_MB), rewritten before every start."""

from __future__ import annotations

import subprocess
import sys

from timothy.database import (
    EMBEDDED_CONFIG_INCLUDE,
    SHARED_BUFFERS_MAX_MB,
    SHARED_BUFFERS_MIN_MB,
    default_shared_buffers_mb,
    stop_embedded,
)
from timothy.drill import BASE_DIR, service_env

# A bound on a command that must finish by itself; generous, never a measure.
COMMAND_TIMEOUT = 180

SHOW_SHARED_BUFFERS = (
    "from django.db import connection\n"
    "with connection.cursor() as cursor:\n"
    '    cursor.execute("SELECT setting::bigint * 8 / 1024 FROM pg_settings '
    "WHERE name = 'shared_buffers'\")\n"
    "    print(cursor.fetchone()[0])\n"
)


def shared_buffers_mb(data_dir, **extra: str) -> int:
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW_SHARED_BUFFERS],
        cwd=BASE_DIR,
        env=service_env(data_dir, **extra),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1])


def test_the_embedded_server_starts_with_the_configured_shared_buffers(tmp_path):
    data_dir = tmp_path / "data"
    try:
        assert shared_buffers_mb(data_dir, TIMOTHY_PG_SHARED_BUFFERS_MB="48") == 48
        # A running server keeps what it started with ...
        assert shared_buffers_mb(data_dir, TIMOTHY_PG_SHARED_BUFFERS_MB="64") == 48
        stop_embedded(data_dir)
        # ... and takes the new value at its next start.
        assert shared_buffers_mb(data_dir, TIMOTHY_PG_SHARED_BUFFERS_MB="64") == 64
        stop_embedded(data_dir)
        assert shared_buffers_mb(data_dir) == default_shared_buffers_mb()
    finally:
        stop_embedded(data_dir)
    main_config = (data_dir / "postgres" / "postgresql.conf").read_text().splitlines()
    assert main_config.count(EMBEDDED_CONFIG_INCLUDE) == 1


def test_the_default_is_a_quarter_of_memory_within_bounds():
    assert SHARED_BUFFERS_MIN_MB <= default_shared_buffers_mb() <= SHARED_BUFFERS_MAX_MB
