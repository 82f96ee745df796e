"""A real Timothy Memory service for the client's tests: `manage.py serve`, for real.

The service runs as `make run` runs it (gunicorn on the public and internal
listeners, the django-q2 worker, its own embedded PostgreSQL in a temporary
folder), optionally with its extraction LLM pointed at a scripted fake on
localhost. Each test package starts one (tests/client, tests/mcp); a test that
stops a service starts its own.

The data folder is made with ``tempfile`` rather than pytest's ``tmp_path``:
the embedded PostgreSQL runs as another user, which must be able to traverse
the folder's parents, and every pytest session (another run on the same
machine included) makes its own base folder private again.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.fakes.openai_server import CHAT, Answer, FakeOpenAI, chat_answer

ROOT = Path(__file__).resolve().parents[2]
SERVICE_TOKEN = "service-token-for-the-client-tests"
# Generous: two shared cores, and the first start creates a database.
START_TIMEOUT = 240
STOP_TIMEOUT = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60) -> object:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"Gave up after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


@dataclass
class Fact:
    """What the scripted LLM extracts when every trigger is in the user's turns."""

    triggers: tuple[str, ...]
    type: str
    content: str
    entities: tuple[str, ...] = ()
    confidence: float = 0.9


_USER_TURN = re.compile(r"^\[turn (\d+)\] user:\n(.*?)(?=^\[turn \d+\] |\Z)", re.S | re.M)


class ScriptedExtractionLLM(FakeOpenAI):
    """The fake OpenAI server, answering extraction prompts by rule, not by queue.

    Extraction calls come from the service's worker at times the test does not
    control, so a queue would hand answers to the wrong call. Each taught fact
    is answered whenever all its triggers appear in the user turns of the
    conversation sent; its ``turn`` is the user turn with the last trigger.
    """

    def __init__(self) -> None:
        super().__init__()
        self.facts: list[Fact] = []

    def teach(self, fact: Fact) -> None:
        with self._lock:
            self.facts.append(fact)

    def conversations(self) -> list[str]:
        """The conversations the service sent to extraction, as rendered for the LLM."""
        return [request.json["messages"][-1]["content"] for request in self.requests_to(CHAT)]

    def _next_answer(self, path: str, payload: object) -> Answer:
        if path != CHAT or not isinstance(payload, dict):
            return super()._next_answer(path, payload)
        conversation = payload["messages"][-1]["content"]
        user_turns = [(int(n), text.strip()) for n, text in _USER_TURN.findall(conversation)]
        with self._lock:
            facts = list(self.facts)
        found = []
        for fact in facts:
            turns = [
                next((n for n, text in user_turns if trigger in text), None)
                for trigger in fact.triggers
            ]
            if None in turns:
                continue
            found.append(
                {
                    "type": fact.type,
                    "content": fact.content,
                    "entities": list(fact.entities),
                    "confidence": fact.confidence,
                    "turn": max(turns),
                }
            )
        return chat_answer({"facts": found})


class RunningService:
    """`python manage.py serve` on free loopback ports, in its own data folder."""

    def __init__(self, *, llm_base_url: str | None = None) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="timothy-client-tests-"))
        self.public_addr = f"127.0.0.1:{free_port()}"
        self.internal_addr = f"127.0.0.1:{free_port()}"
        self.public_url = f"http://{self.public_addr}"
        self.internal_url = f"http://{self.internal_addr}"
        self.service_token = SERVICE_TOKEN
        self.env = service_env(
            TIMOTHY_DATA_DIR=str(self.data_dir),
            TIMOTHY_PUBLIC_ADDR=self.public_addr,
            TIMOTHY_INTERNAL_ADDR=self.internal_addr,
            TIMOTHY_SERVICE_TOKEN=SERVICE_TOKEN,
            # The suite calls far more than a person would.
            TIMOTHY_RATE_LIMIT_PER_MINUTE="0",
        )
        if llm_base_url:
            self.env.update(
                TIMOTHY_LLM_BASE_URL=llm_base_url,
                TIMOTHY_LLM_MODEL="fake-model",
                TIMOTHY_LLM_API_KEY="sk-test",
                TIMOTHY_LLM_TIMEOUT="30",
            )
        self.log_path = self.data_dir / "serve.log"
        self.owner = "owner"
        self.token = ""
        self.process: subprocess.Popen | None = None

    def start(self) -> RunningService:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "serve"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(self._started, "the service to start", START_TIMEOUT)
        except BaseException as error:
            self.kill()
            raise AssertionError(f"{error}; its log:\n{self.log()}") from error
        match = re.search(r"API token: (tm_\S+)", self.log())
        assert match, "serve did not print the owner's token:\n" + self.log()
        self.token = match.group(1)
        return self

    def _started(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError("serve exited early")
        if "Ctrl-C stops everything" not in self.log():
            return False
        try:
            public = requests.get(self.public_url + "/admin/login/", timeout=10)
            internal = requests.post(self.internal_url + "/internal/v1/retrieve", timeout=10)
        except requests.ConnectionError:
            return False
        return public.status_code == 200 and internal.status_code in (400, 401)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Ctrl-C, as a person stops `make run`: the service stops its children and PostgreSQL."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("serve did not stop on Ctrl-C:\n" + self.log())

    def remove(self) -> None:
        """Stop, then delete the data folder."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """Last resort when start-up fails: SIGINT first, so serve stops its children."""
        with contextlib.suppress(AssertionError):
            self.stop()

    def new_owner(self) -> tuple[str, str]:
        """A fresh owner with a token (``createtoken``): a test with nobody else's memories."""
        username = "owner-" + uuid.uuid4().hex[:10]
        result = subprocess.run(
            [sys.executable, "manage.py", "createtoken", username, "--name", "client tests"],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return username, result.stdout.strip().splitlines()[-1]


def service_env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "PYTEST", "TIMOTHY_"))
    }
    env.pop("DATABASE_URL", None)
    env.update(
        TIMOTHY_EMBEDDING_PROVIDER="none",
        TIMOTHY_WORKERS="1",
        TIMOTHY_WEB_WORKERS="1",
    )
    env.update(extra)
    return env
