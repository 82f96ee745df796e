"""A dead database is a JSON 503, never an HTML page, a 500 or a hang.

The service runs for real in a gunicorn subprocess (with the hooks of `make
run`) whose DATABASE_URL points at a port nobody listens on (refused at once),
or at a listener that accepts and never answers (the connect timeout must end
the wait). A server that freezes with connections open: tests/faults/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.client.faults import silent_listener
from tests.client.service import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVICE_TOKEN = "service-token-for-the-db-down-test"
# Any well-formed token: checking it needs the database.
API_TOKEN = "tm_" + "a" * 43
# Generous bounds on a busy machine: they only keep a regression from hanging
# the suite; nothing here is timed.
START_TIMEOUT = 120
HTTP_TIMEOUT = 60
# How long gunicorn may take to stop once asked before it is killed.
STOP_TIMEOUT = 60


@contextmanager
def service(wsgi: str, database_port: int) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://timothy:secret@127.0.0.1:{database_port}/timothy",
        "TIMOTHY_SERVICE_TOKEN": SERVICE_TOKEN,
        "TIMOTHY_EMBEDDING_PROVIDER": "none",
        "DJANGO_SETTINGS_MODULE": "",
    }
    env.pop("DJANGO_SETTINGS_MODULE")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--bind",
            f"127.0.0.1:{port}",
            "--config",
            "python:timothy.gunicorn_conf",
            "--workers",
            "1",
            "--timeout",
            "60",
            f"{wsgi}:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode())
            try:
                # The worker may still be importing Django: wait for its answer.
                requests.get(url + "/v1/", timeout=START_TIMEOUT)
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        # Gunicorn lets a request in flight finish for up to its graceful
        # timeout; on a busy machine that can run past any short wait, and the
        # test is not about shutting down: stop it for good if it lingers.
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def assert_database_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "database_unavailable"


@pytest.fixture(scope="module")
def public_url() -> Iterator[str]:
    with service("timothy.wsgi", free_port()) as url:
        yield url


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/memories", None),
        ("POST", "/v1/memories", {"content": "x", "type": "semantic", "mode": "remember"}),
        ("POST", "/v1/memories/1", {"action": "confirm"}),
        ("GET", "/v1/memories/1/chain", None),
        ("POST", "/v1/memories/search", {"query": "anything"}),
    ],
)
def test_it_answers_503_on_every_route_when_the_database_refuses(public_url, method, path, body):
    response = requests.request(
        method,
        public_url + path,
        json=body,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
        timeout=HTTP_TIMEOUT,
    )
    assert_database_unavailable(response)


def test_it_still_answers_401_without_a_token(public_url):
    response = requests.get(public_url + "/v1/memories", timeout=HTTP_TIMEOUT)
    assert response.status_code == 401


def test_it_answers_503_on_the_internal_listener():
    with service("timothy.internal_wsgi", free_port()) as url:
        response = requests.post(
            url + "/internal/v1/retrieve",
            json={"owner": "alice", "query": "anything"},
            headers={"Authorization": f"Bearer {SERVICE_TOKEN}"},
            timeout=HTTP_TIMEOUT,
        )
        assert_database_unavailable(response)
        # And the internal listener serves nothing of the public API.
        assert requests.get(url + "/v1/memories", timeout=HTTP_TIMEOUT).status_code == 404


def test_it_gives_up_on_a_database_that_never_answers():
    with silent_listener() as port, service("timothy.wsgi", port) as url:
        # The connect timeout (3 s) ends the wait.
        response = requests.get(
            url + "/v1/memories",
            headers={"Authorization": f"Bearer {API_TOKEN}"},
            timeout=HTTP_TIMEOUT,
        )
        assert_database_unavailable(response)


def test_it_shows_pages_a_clear_503_when_the_database_refuses(public_url):
    # A signed-in looking request: loading the session needs the database.
    response = requests.get(public_url + "/", cookies={"sessionid": "x" * 32}, timeout=HTTP_TIMEOUT)
    assert response.status_code == 503
    assert response.headers["Content-Type"].startswith("text/html")
    assert "out of reach for a moment" in response.text
    assert response.headers["Retry-After"] == "30"
