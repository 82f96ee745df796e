"""A fake OpenAI-compatible API: a real HTTP server on localhost, in a thread.

The real client code talks to it over HTTP. Tests queue answers per path
(status, JSON or raw body, delay, headers); with nothing queued,
``/v1/embeddings`` answers deterministic vectors and ``/v1/chat/completions``
answers 500 so that a missing set-up is obvious. Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EMBEDDINGS = "/v1/embeddings"
CHAT = "/v1/chat/completions"


@dataclass
class Answer:
    status: int = 200
    json: object = None
    body: str | None = None  # raw text, for malformed answers
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    json: object


def deterministic_vector(text: str, dimensions: int) -> list[float]:
    """A unit vector that depends only on the text: equal texts, equal vectors."""
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def chat_answer(content: object, *, refusal: str | None = None) -> Answer:
    """A chat completion whose message content is ``content`` (JSON-encoded unless a str)."""
    text = content if isinstance(content, str) or content is None else json.dumps(content)
    return Answer(
        json={
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1764470000,
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": refusal},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
    )


class FakeOpenAI:
    def __init__(self, dimensions: int = 384) -> None:
        self.dimensions = dimensions
        self.vectors: dict[str, list[float]] = {}
        self.requests: list[RecordedRequest] = []
        self._answers: dict[str, deque[Answer]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def queue(self, path: str, *answers: Answer) -> None:
        with self._lock:
            self._answers[path].extend(answers)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.path == path]

    def _next_answer(self, path: str, payload: object) -> Answer:
        with self._lock:
            if self._answers[path]:
                return self._answers[path].popleft()
        if path == EMBEDDINGS and isinstance(payload, dict):
            texts = payload.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            return Answer(json=self.embeddings_body(texts))
        return Answer(status=500, json={"error": {"message": f"no answer queued for {path}"}})

    def embeddings_body(self, texts: list[str]) -> dict:
        return {
            "object": "list",
            "data": [
                {
                    "object": "embedding",
                    "index": index,
                    "embedding": self.vectors.get(text)
                    or deterministic_vector(text, self.dimensions),
                }
                for index, text in enumerate(texts)
            ],
            "model": "fake-embedding",
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    payload = json.loads(raw)
                except ValueError:
                    payload = None
                with fake._lock:
                    fake.requests.append(RecordedRequest(self.path, dict(self.headers), payload))
                answer = fake._next_answer(self.path, payload)
                if answer.delay:
                    time.sleep(answer.delay)
                body = answer.body if answer.body is not None else json.dumps(answer.json)
                data = body.encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            def log_message(self, format: str, *args) -> None:
                pass

        return Handler
