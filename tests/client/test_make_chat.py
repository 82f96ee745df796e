"""`make chat` (`manage.py connect chat`) after `make run`: the example chat with the
owner's assistant token, and extraction through that token, against a real service."""

from __future__ import annotations

import subprocess
import sys
import uuid

from tests.client.service import ROOT, Fact, wait_for
from tests.client.test_example_chat import ChatProcess
from tests.fakes.openai_server import CHAT, chat_answer
from timothy_client import Memory

CONNECT_CHAT = [sys.executable, "manage.py", "connect", "chat"]
EXTRACTION_WAIT = 180


def chat_env(timothy, fake_openai) -> dict[str, str]:
    return {
        **timothy.env,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-chat",
        "OPENAI_MODEL": "fake-chat-model",
        "TIMOTHY_CLIENT_TIMEOUT": "30",
    }


def test_make_chat_remembers_what_was_said(timothy, fake_openai, extraction_llm):
    city = "Ulaanbaatar-" + uuid.uuid4().hex[:6]
    extraction_llm.teach(Fact((city,), "semantic", f"The owner lives in {city}."))
    fake_openai.queue(CHAT, chat_answer("Nice!"))
    chat = ChatProcess(chat_env(timothy, fake_openai), CONNECT_CHAT)
    assert chat.say(f"I live in {city} now.") == "assistant> Nice!"
    code, errors = chat.quit()
    assert code == 0, errors
    assert "Memory: http://" in errors and "extraction on." in errors
    # The turn went to extraction with the assistant's token: the fact waits for the owner.
    with Memory(timothy.public_url, timothy.token) as owner:
        proposed = wait_for(
            lambda: [m for m in owner.list(status="proposed") if city in m.content],
            "the extracted proposal",
            EXTRACTION_WAIT,
        )
    assert [memory.content for memory in proposed] == [f"The owner lives in {city}."]


def test_make_chat_names_the_chat_model_settings_it_needs(timothy):
    env = {k: v for k, v in timothy.env.items() if not k.startswith("OPENAI_")}
    result = subprocess.run(
        CONNECT_CHAT, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "make chat needs a chat model: set OPENAI_BASE_URL" in result.stderr
    assert "Traceback" not in result.stderr
