"""Both listeners answer each connection once and close it, so that waiting
requests queue in the listening socket for whichever worker frees a thread
first, not behind the worker a kept-alive connection first reached
(``--worker-connections`` equal to ``--threads`` in
memories/management/commands/serve.py)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import requests

from tests.faults.conftest import SERVICE_TOKEN, api
from timothy.drill import HTTP_TIMEOUT


def answers_once_and_closes(base: str, path: str, headers: dict[str, str]) -> list[bytes]:
    """Two requests written at once on one connection: what the server sent
    before it closed the connection, split into status lines."""
    address = urlsplit(base)
    lines = [f"GET {path} HTTP/1.1", f"Host: {address.netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    received = b""
    with socket.create_connection((address.hostname, address.port), timeout=HTTP_TIMEOUT) as sock:
        sock.sendall(request + request)
        while chunk := sock.recv(65536):
            received += chunk
    return [line for line in received.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


def public_site_options(service) -> list[list[str]]:
    """The command lines of the public site's gunicorn processes (master and workers)."""
    return [
        process.cmdline()
        for process in service.children()
        if "timothy.wsgi:application" in process.cmdline()
    ]


def test_each_answer_closes_its_connection(start_service):
    service = start_service(TIMOTHY_WEB_WORKERS="2", TIMOTHY_WEB_THREADS="3")
    command_lines = public_site_options(service)
    assert command_lines
    for command in command_lines:
        # TIMOTHY_WEB_THREADS sets the threads, and each thread takes one connection.
        assert command[command.index("--threads") + 1] == "3", command
        assert command[command.index("--worker-connections") + 1] == "3", command
        assert command[command.index("--workers") + 1] == "2", command
    session = api(service)
    for _ in range(3):
        response = session.get(service.base + "/v1/memories", timeout=HTTP_TIMEOUT)
        assert response.status_code == 200, response.text
        assert response.headers["Connection"] == "close"

    owner = {"Authorization": f"Bearer {service.owner_token}"}
    assert answers_once_and_closes(service.base, "/v1/memories", owner) == [b"HTTP/1.1 200 OK"]

    internal = requests.post(
        service.internal + "/internal/v1/retrieve",
        json={"user_id": 1, "query": "anything"},
        headers={"Authorization": f"Bearer {SERVICE_TOKEN}"},
        timeout=HTTP_TIMEOUT,
    )
    assert internal.headers["Connection"] == "close", internal.text
