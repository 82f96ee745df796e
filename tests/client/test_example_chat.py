"""examples/chat.py, run as a person runs it (lines on stdin), against a real service
and a fake OpenAI-compatible chat model."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from tests.fakes.openai_server import CHAT, chat_answer
from timothy_client import Memory
from timothy_client.chat import DEFAULT_SYSTEM_PROMPT

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "chat.py"
ANSWER_WAIT = 120


class ChatProcess:
    def __init__(self, env: dict[str, str], command: list[str] | None = None) -> None:
        self.process = subprocess.Popen(
            command or [sys.executable, str(SCRIPT)],
            cwd=SCRIPT.parents[1],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def say(self, text: str) -> str:
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return self.lines.get(timeout=ANSWER_WAIT)

    def quit(self) -> tuple[int, str]:
        self.process.stdin.write("/quit\n")
        self.process.stdin.flush()
        self.process.wait(timeout=ANSWER_WAIT)
        return self.process.returncode, self.process.stderr.read()


def test_it_chats_with_memory_from_the_terminal(timothy, fake_openai, tmp_path):
    owner, token = timothy.new_owner()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIMOTHY_", "DJANGO_"))}
    env.update(
        TIMOTHY_URL=timothy.public_url,
        TIMOTHY_TOKEN=token,
        TIMOTHY_INTERNAL_URL=timothy.internal_url,
        TIMOTHY_SERVICE_TOKEN=timothy.service_token,
        TIMOTHY_OWNER_USERNAME=owner,
        TIMOTHY_CLIENT_TIMEOUT="30",
        OPENAI_BASE_URL=fake_openai.base_url,
        OPENAI_API_KEY="sk-chat",
        OPENAI_MODEL="fake-chat-model",
    )
    kite = "Kite-" + uuid.uuid4().hex[:6]
    fake_openai.queue(CHAT, chat_answer("Hello!"), chat_answer(f"You fly {kite}."))
    chat = ChatProcess(env)
    assert chat.say("Hello there") == "assistant> Hello!"
    # Saved meanwhile (as through the queue page): the next turn recalls it.
    with Memory(timothy.public_url, token) as memory:
        memory.remember(f"Flies a kite called {kite}.", "semantic", entities=[kite])
    assert chat.say(f"Which kite is {kite}?") == f"assistant> You fly {kite}."
    code, errors = chat.quit()
    assert code == 0, errors

    first, second = (r.json for r in fake_openai.requests_to(CHAT))
    assert first["model"] == "fake-chat-model"
    # The script's stable prefix alone, then the same prefix followed by the block.
    assert first["messages"][0]["content"] == DEFAULT_SYSTEM_PROMPT
    system = second["messages"][0]["content"]
    assert system.startswith(DEFAULT_SYSTEM_PROMPT + "\n\n<memory source=")
    assert f"- [semantic] Flies a kite called {kite}." in system
    assert fake_openai.requests_to(CHAT)[0].headers["Authorization"] == "Bearer sk-chat"
