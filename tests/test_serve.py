"""`make run` end to end: the serve command on a fresh data folder, for real.

These tests start their own embedded PostgreSQL in a temporary folder, so they
neither need nor touch the test database.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

BASE_DIR = Path(__file__).resolve().parent.parent
SERVE_TIMEOUT = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    env.pop("DATABASE_URL", None)
    env.update(
        TIMOTHY_DATA_DIR=str(data_dir),
        TIMOTHY_EMBEDDING_PROVIDER="none",
        TIMOTHY_PUBLIC_ADDR=f"127.0.0.1:{free_port()}",
        TIMOTHY_INTERNAL_ADDR=f"127.0.0.1:{free_port()}",
        TIMOTHY_WORKERS="1",
        TIMOTHY_WEB_WORKERS="1",
    )
    env.update(extra)
    return env


class Service:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.base = f"http://{env['TIMOTHY_PUBLIC_ADDR']}"
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve"],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + SERVE_TIMEOUT
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line and self.process.poll() is not None:
                raise AssertionError("serve exited early:\n" + "".join(self.lines))
            self.lines.append(line)
            if "Ctrl-C stops everything" in line:
                break
        while time.monotonic() < deadline:
            try:
                if requests.get(self.base + "/admin/login/", timeout=2).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.3)
        raise AssertionError("the site never answered:\n" + "".join(self.lines))

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        out, _ = self.process.communicate(timeout=60)
        self.lines.append(out)
        return self.process.returncode

    @property
    def output(self) -> str:
        return "".join(self.lines)


def admin_login(base: str, username: str, password: str) -> bool:
    session = requests.Session()
    page = session.get(base + "/admin/login/", timeout=5)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = session.post(
        base + "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password},
        headers={"Referer": base + "/admin/login/"},
        timeout=5,
    )
    return answer.url.rstrip("/").endswith("/admin")


def check_chunked_bodies(base: str, token: str) -> None:
    """Gunicorn decodes a chunked body (no Content-Length); the API reads it whole."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    parts = [b'{"content": "Prefers aisle seats", ', b'"type": "preference", "mode": "remember"}']
    created = requests.post(base + "/v1/memories", data=iter(parts), headers=headers, timeout=10)
    assert created.status_code == 201, created.text
    assert created.json()["content"] == "Prefers aisle seats"

    oversized = iter([b'{"content": "', b"x" * 300_000, b'"}'])  # limit: 256 KiB
    refused = requests.post(base + "/v1/memories", data=oversized, headers=headers, timeout=10)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "payload_too_large"


def test_it_serves_stops_and_keeps_data_across_runs(tmp_path):
    data_dir = tmp_path / "data"
    first = Service(service_env(data_dir))
    try:
        first.wait_until_serving()
        password = re.search(r"password: (\S+)", first.output).group(1)
        token = re.search(r"API token: (tm_\S+)", first.output).group(1)
        assert admin_login(first.base, "owner", password)
        assert token.startswith("tm_")
        internal = f"http://{first.env['TIMOTHY_INTERNAL_ADDR']}/admin/login/"
        # The internal listener is up and serves nothing of the public site.
        assert requests.get(internal, timeout=5).status_code == 404
        check_chunked_bodies(first.base, token)
    finally:
        code = first.stop()
    assert code == 0, first.output
    assert "Stopped." in first.output
    assert not (data_dir / "postgres" / "postmaster.pid").exists(), "PostgreSQL still runs"

    second = Service(service_env(data_dir))
    try:
        second.wait_until_serving()
        assert "Created the owner account" not in second.output
        assert admin_login(second.base, "owner", password)
    finally:
        assert second.stop() == 0


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
        timeout=60,
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
        timeout=60,
    )
    assert result.returncode != 0
    assert "Cannot reach the PostgreSQL server" in result.stderr
    assert "Traceback" not in result.stderr
