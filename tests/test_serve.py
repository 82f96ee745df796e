"""`make run` end to end: the serve command on a fresh data folder, for real.

These tests start their own embedded PostgreSQL in a temporary folder, so they
neither need nor touch the test database. Every wait is on a condition with a
generous deadline (timothy/drill.py), never on a short timeout: CI runs on a
busy shared machine.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from timothy.drill import BASE_DIR, HTTP_TIMEOUT, ServeProcess, free_port, service_env

# Bound on a command that must finish by itself; generous, never a measure.
SUBPROCESS_TIMEOUT = 180


def admin_login(base: str, username: str, password: str) -> bool:
    session = requests.Session()
    page = session.get(base + "/admin/login/", timeout=HTTP_TIMEOUT)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = session.post(
        base + "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password},
        headers={"Referer": base + "/admin/login/"},
        timeout=HTTP_TIMEOUT,
    )
    return answer.url.rstrip("/").endswith("/admin")


def check_chunked_bodies(base: str, token: str) -> None:
    """Gunicorn decodes a chunked body (no Content-Length); the API reads it whole."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    parts = [b'{"content": "Prefers aisle seats", ', b'"type": "preference", "mode": "remember"}']
    created = requests.post(
        base + "/v1/memories", data=iter(parts), headers=headers, timeout=HTTP_TIMEOUT
    )
    assert created.status_code == 201, created.text
    assert created.json()["content"] == "Prefers aisle seats"

    oversized = iter([b'{"content": "', b"x" * 300_000, b'"}'])  # limit: 256 KiB
    refused = requests.post(
        base + "/v1/memories", data=oversized, headers=headers, timeout=HTTP_TIMEOUT
    )
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "payload_too_large"


def test_it_serves_stops_and_keeps_data_across_runs(tmp_path):
    data_dir = tmp_path / "data"
    first = ServeProcess(service_env(data_dir))
    try:
        first.wait_until_serving()
        password = first.owner_password
        token = first.owner_token
        assert admin_login(first.base, "owner", password)
        assert token.startswith("tm_")
        # The internal listener is up and serves nothing of the public site.
        response = requests.get(first.internal + "/admin/login/", timeout=HTTP_TIMEOUT)
        assert response.status_code == 404
        check_chunked_bodies(first.base, token)
        code = first.stop()
    finally:
        first.kill()
    assert code == 0, first.output
    assert "Stopped." in first.output
    assert not (data_dir / "postgres" / "postmaster.pid").exists(), "PostgreSQL still runs"

    second = ServeProcess(service_env(data_dir))
    try:
        second.wait_until_serving()
        assert "Created the owner account" not in second.output
        assert admin_login(second.base, "owner", password)
        assert second.stop() == 0, second.output
    finally:
        second.kill()


def system_postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert found, "Debian's PostgreSQL server is missing: `make test` installs it"
    return Path(found[-1]).parent


@pytest.fixture
def postgres_without_pgvector(tmp_path):
    """A real PostgreSQL server that has no pgvector: Debian's, started by hand."""
    bin_dir = system_postgres_bin()
    data = tmp_path / "pg-no-vector"
    data.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root.
        os.chown(tmp_path, 65534, 65534)
        os.chown(data, 65534, 65534)
        as_user = ["runuser", "-u", "nobody", "--"]
    port = free_port()
    subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_user,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-o",
            f"-p {port} -k {data} -h 127.0.0.1",
            "-l",
            str(data / "log"),
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )


def test_it_refuses_a_server_without_pgvector(tmp_path, postgres_without_pgvector):
    env = service_env(tmp_path / "data", DATABASE_URL=postgres_without_pgvector)
    result = subprocess.run(
        [sys.executable, "manage.py", "serve", "--check-only"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert "has no pgvector extension" in message
    assert "0.8 or newer" in message
    assert "Traceback" not in result.stderr


def test_it_says_clearly_when_the_server_is_unreachable(tmp_path):
    env = service_env(tmp_path / "data", DATABASE_URL=f"postgresql://x@127.0.0.1:{free_port()}/x")
    result = subprocess.run(
        [sys.executable, "manage.py", "serve", "--check-only"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode != 0
    assert "Cannot reach the PostgreSQL server" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.django_db
def test_it_refuses_to_serve_with_a_retrieval_index_trigger_switched_off():
    from io import StringIO

    from django.core.management.base import CommandError

    from memories.management.commands.serve import Command
    from retrieval import index

    command = Command(stdout=StringIO(), stderr=StringIO())
    command.check_retrieval_index()  # a healthy index: nothing to say
    assert command.stderr._out.getvalue() == ""
    index.pause()
    with pytest.raises(CommandError, match="retrieval index is incomplete"):
        command.check_retrieval_index()
    assert "memory_indexes_postings on memories_memory is switched off" in (
        command.stderr._out.getvalue()
    )


def test_it_says_in_one_sentence_that_its_address_is_taken(tmp_path):
    # Before anything else (no database is reached here): gunicorn would retry
    # the port, pause, exit, and be restarted with ever longer pauses.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        env = service_env(
            tmp_path / "data",
            TIMOTHY_PUBLIC_ADDR=address,
            DATABASE_URL=f"postgresql://x@127.0.0.1:{free_port()}/x",
        )
        result = subprocess.run(
            [sys.executable, "manage.py", "serve"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
    assert result.returncode == 1, result.stdout + result.stderr
    sentence = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"CommandError: Cannot serve: {re.escape(address)} is already in use by pid "
        rf"{os.getpid()} \(\S*python\S* .+\); stop that, or set TIMOTHY_PUBLIC_ADDR to "
        r"another address\.",
        sentence,
    ), sentence
    assert "Serving" not in result.stdout
