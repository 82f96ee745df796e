"""Below Django: what gunicorn and the WSGI wrapper answer, over real sockets.

Both listeners run for real, as `make run` starts them (gunicorn with
timothy/gunicorn_conf.py). Every answer is the JSON error envelope: requests
gunicorn cannot read, body codings nothing here decodes, a SCRIPT_NAME header
(ignored), and on the internal listener any path but its two routes.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
SERVICE_TOKEN = "service-token-for-the-http-errors-test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def listener(wsgi: str) -> Iterator[int]:
    """gunicorn as `make run` starts it; the database is a port nobody serves,
    so anything that reaches it answers 503 at once."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))},
        "DATABASE_URL": f"postgres://nobody@127.0.0.1:{free_port()}/nothing",
        "TIMOTHY_SERVICE_TOKEN": SERVICE_TOKEN,
        "TIMOTHY_EMBEDDING_PROVIDER": "none",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            "python:timothy.gunicorn_conf",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "2",
            f"{wsgi}:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode())
            try:
                # The worker may still be importing Django: wait for its answer.
                requests.get(f"http://127.0.0.1:{port}/v1/", timeout=60)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture(scope="module")
def public() -> Iterator[int]:
    with listener("timothy.wsgi") as port:
        yield port


@pytest.fixture(scope="module")
def internal() -> Iterator[int]:
    with listener("timothy.internal_wsgi") as port:
        yield port


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self.body = response.read()

    def json_error(self) -> dict:
        assert self.headers["Content-Type"] == "application/json", (self.status, self.body)
        import json

        return json.loads(self.body)["error"]


def send(port: int, raw: bytes) -> Answer:
    """Send bytes as they are (requests would refuse to send most of these)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock, method="GET")
        response.begin()
        return Answer(response)


def request(method: str, path: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# --- requests gunicorn refuses itself ---------------------------------------------

GUNICORN_REFUSALS = {
    "over-long request line": (request("GET", "/v1/memories?q=" + "a" * 5000), 414, "uri_too_long"),
    "Content-Length not a number": (
        request("POST", "/v1/memories", "Content-Length: abc"),
        400,
        "invalid_request",
    ),
    "negative Content-Length": (
        request("POST", "/v1/memories", "Content-Length: -1"),
        400,
        "invalid_request",
    ),
    "two Content-Lengths": (
        request("POST", "/v1/memories", "Content-Length: 2", "Content-Length: 3", body=b"{}"),
        400,
        "invalid_request",
    ),
    "Content-Length with Transfer-Encoding": (
        request(
            "POST",
            "/v1/memories",
            "Content-Length: 5",
            "Transfer-Encoding: chunked",
            body=b"2\r\n{}\r\n0\r\n\r\n",
        ),
        400,
        "invalid_request",
    ),
    "NUL in a header": (request("GET", "/v1/memories", "X-Note: a\x00b"), 400, "invalid_request"),
    "unknown HTTP version": (b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", 400, "invalid_request"),
    "garbage request line": (b"\x16\x03\x01 hello\r\n\r\n", 400, "invalid_request"),
    "header too long": (
        request("GET", "/v1/memories", "X-Pad: " + "p" * 10_000),
        431,
        "header_fields_too_large",
    ),
    "broken chunk size": (
        request(
            "POST", "/v1/memories", "Transfer-Encoding: chunked", body=b"zz\r\n{}\r\n0\r\n\r\n"
        ),
        400,
        "invalid_request",
    ),
    "unknown transfer coding": (
        request("POST", "/v1/memories", "Transfer-Encoding: magic, chunked", body=b"0\r\n\r\n"),
        400,
        "invalid_request",
    ),
    "chunked twice": (
        request("POST", "/v1/memories", "Transfer-Encoding: chunked, chunked", body=b"0\r\n\r\n"),
        400,
        "invalid_request",
    ),
}


@pytest.mark.parametrize("case", GUNICORN_REFUSALS)
def test_it_answers_json_for_what_gunicorn_refuses(public, case):
    raw, status, code = GUNICORN_REFUSALS[case]
    answer = send(public, raw)
    assert answer.status == status, answer.body
    error = answer.json_error()
    assert error["code"] == code
    assert error["message"]


@pytest.mark.parametrize("case", ["over-long request line", "NUL in a header", "header too long"])
def test_it_answers_json_for_what_gunicorn_refuses_on_the_internal_listener(internal, case):
    raw, status, code = GUNICORN_REFUSALS[case]
    answer = send(internal, raw.replace(b"/v1/memories", b"/internal/v1/retrieve"))
    assert answer.status == status
    assert answer.json_error()["code"] == code


# --- body codings -------------------------------------------------------------------

JSON_BODY = b'{"query": "tea"}'


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n"


@pytest.mark.parametrize("coding", ["gzip, chunked", "deflate, chunked", "compress, chunked"])
def test_it_refuses_a_compressed_transfer_coding(public, coding):
    # gunicorn would decode the chunks and hand on the body as if it were plain.
    answer = send(
        public,
        request(
            "POST",
            "/v1/memories/search",
            "Content-Type: application/json",
            f"Transfer-Encoding: {coding}",
            body=chunked(JSON_BODY),
        ),
    )
    assert answer.status == 400
    error = answer.json_error()
    assert error["code"] == "unsupported_transfer_coding"
    assert error["details"] == {"header": "Transfer-Encoding"}


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate, gzip"])
def test_it_refuses_a_content_coding(public, internal, coding):
    for port, path in ((public, "/v1/memories/search"), (internal, "/internal/v1/retrieve")):
        answer = send(
            port,
            request(
                "POST",
                path,
                "Content-Type: application/json",
                f"Content-Encoding: {coding}",
                f"Content-Length: {len(JSON_BODY)}",
                body=JSON_BODY,
            ),
        )
        assert answer.status == 415
        assert answer.json_error()["code"] == "unsupported_content_coding"
        assert answer.headers["Accept-Encoding"] == "identity"


def test_it_still_reads_a_plain_chunked_body(public):
    answer = send(
        public,
        request(
            "POST",
            "/v1/memories/search",
            "Content-Type: application/json",
            "Transfer-Encoding: chunked",
            body=chunked(JSON_BODY),
        ),
    )
    # Read, parsed, and refused only for want of a token.
    assert answer.status == 401
    assert answer.json_error()["code"] == "unauthorized"


# --- SCRIPT_NAME from a client ---------------------------------------------------------


@pytest.mark.parametrize("script_name", ["/v1", "/elsewhere", "/", "x"])
def test_it_ignores_a_script_name_header(public, script_name):
    answer = send(public, request("GET", "/v1/memories", f"SCRIPT_NAME: {script_name}"))
    # Exactly as without the header: the route is found, the token is missing.
    assert answer.status == 401
    assert answer.json_error()["code"] == "unauthorized"


def test_it_ignores_a_script_name_header_on_the_internal_listener(internal):
    for script_name in ("/internal", "/elsewhere"):
        answer = send(
            internal,
            request(
                "POST",
                "/internal/v1/retrieve",
                f"SCRIPT_NAME: {script_name}",
                "PATH_INFO: /elsewhere",
                "Content-Type: application/json",
                f"Content-Length: {len(JSON_BODY)}",
                body=JSON_BODY,
            ),
        )
        assert answer.status == 401
        assert answer.json_error()["code"] == "unauthorized"


# --- the internal listener serves two routes --------------------------------------------

NOT_INTERNAL = [
    "/static/css/timothy.css",
    "/static/js/timothy.js",
    "/static/img/favicon.svg",
    "/static/admin/css/base.css",
    "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css",
    "/favicon.ico",
    "/",
    "/login/",
    "/admin/",
    "/api/schema/",
    "/internal/v1/retrieve/",
    "/internal/v1",
]


@pytest.mark.parametrize("path", NOT_INTERNAL)
def test_it_serves_nothing_but_its_two_routes_on_the_internal_listener(internal, path):
    answer = send(internal, request("GET", path))
    assert answer.status == 404, answer.body
    assert answer.json_error()["code"] == "not_found"


def test_it_still_serves_static_files_on_the_public_listener(public):
    answer = send(public, request("GET", "/static/css/timothy.css"))
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/css")
