"""Broken servers on localhost, for the failures a real network produces.

None of them imitates the Timothy API: they stand in for what sits between a
client and the service when things go wrong (nothing listening, a hung
socket, a proxy's error page, a connection cut after the request arrived).
``FlakyProxy`` forwards to the real service and breaks only the calls it is
told to.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from tests.client.service import free_port


def refused_url() -> str:
    """An address where nothing listens: every connection is refused."""
    return f"http://127.0.0.1:{free_port()}"


@contextmanager
def silent_server() -> Iterator[str]:
    """Accepts connections, reads nothing, answers nothing (its URL)."""
    with silent_listener() as port:
        yield f"http://127.0.0.1:{port}"


@contextmanager
def silent_listener() -> Iterator[int]:
    """A TCP listener that accepts connections and never says a word (its port):
    a hung server, or a frozen database."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(32)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        server.close()


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length)


def fixed_answer_server(status: int, body: bytes, content_type: str) -> _Server:
    """Answers every request with the same status and body."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            _read_body(self)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args) -> None:
            pass

    return _Server(Handler)


def dripping_server(seconds: float = 30.0) -> _Server:
    """Answers 200 at once, then sends the body one byte at a time for ``seconds``.

    Every read gets a byte well within any per-read timeout, so only a
    deadline on the whole call can end the wait.
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            _read_body(self)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            deadline = time.monotonic() + seconds
            try:
                while time.monotonic() < deadline:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args) -> None:
            pass

    return _Server(Handler)


class FlakyProxy(_Server):
    """Forwards to ``upstream``; the first ``failures`` calls fail in the way of ``mode``.

    ``drop_answer``: the request reaches the service, then the connection is cut
    before the answer comes back. ``bad_gateway``: a proxy's 502 page, the
    service never sees the request.
    """

    def __init__(self, upstream: str, mode: str, failures: int = 1) -> None:
        self.upstream = upstream
        self.mode = mode
        self.failures_left = failures
        self.forwarded: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = _read_body(self)
                with proxy.lock:
                    fail = proxy.failures_left > 0
                    proxy.failures_left -= 1
                if fail and proxy.mode == "bad_gateway":
                    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
                    self.send_response(502)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                headers = {
                    name: value
                    for name, value in self.headers.items()
                    if name.lower() in ("authorization", "content-type", "idempotency-key")
                }
                answer = requests.request(
                    self.command,
                    proxy.upstream + self.path,
                    data=body or None,
                    headers=headers,
                    timeout=60,
                )
                with proxy.lock:
                    proxy.forwarded.append((self.command, self.path, headers))
                if fail:  # drop_answer: the write happened, the caller never hears of it
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(answer.status_code)
                for name in ("Content-Type", "Idempotent-Replayed", "Retry-After"):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = _forward

            def log_message(self, format: str, *args) -> None:
                pass

        super().__init__(Handler)
