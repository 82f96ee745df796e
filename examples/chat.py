"""A chat in the terminal with long-term memory: the whole Timothy cycle in one loop.

    export TIMOTHY_TOKEN=tm_…                 # the owner's API token (recall, remember, extraction)
    export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-… OPENAI_MODEL=gpt-4o-mini
    python examples/chat.py

(`make chat` does all of this after `make run`.) It says first, on stderr,
whether the service takes extraction: that needs an LLM on the service's side
(TIMOTHY_LLM_BASE_URL when starting `make run`); without one the chat still
recalls, and saves what the model is asked to remember.

Each message is recalled on (the block goes after the stable system prompt),
the model may call `remember`, and every finished turn goes to extraction;
turns that no longer fit the context go to extraction before they are dropped.
With the memory service down the chat goes on, without memories.
Type /quit (or Ctrl-D) to leave.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from timothy_client import Memory
from timothy_client.chat import DEFAULT_MAX_HISTORY_CHARS, ChatLoop, ChatModel, ChatModelError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", help="session id (default: a new one)")
    parser.add_argument("--budget", type=int, help="token budget of the memory block")
    parser.add_argument(
        "--max-history-chars",
        type=int,
        default=DEFAULT_MAX_HISTORY_CHARS,
        help=f"history kept in context before compaction (default {DEFAULT_MAX_HISTORY_CHARS})",
    )
    options = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="[%(name)s] %(message)s")

    memory = Memory.from_env(session_id=options.session)
    model = ChatModel(
        os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        api_key=os.environ.get("OPENAI_API_KEY"),
    )
    chat = ChatLoop(
        memory, model, token_budget=options.budget, max_history_chars=options.max_history_chars
    )
    problem = memory.check_extraction()
    print(
        f"Memory: {memory.base_url}; extraction "
        + ("on." if problem is None else f"off ({problem.rstrip('.')}).")
        + " Type /quit to leave.",
        file=sys.stderr,
        flush=True,
    )
    interactive = sys.stdin.isatty()
    try:
        while True:
            if interactive:
                print("you> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line or line.strip() == "/quit":
                break
            if not line.strip():
                continue
            try:
                answer = chat.send(line.strip())
            except ChatModelError as error:
                print(f"(the chat model failed: {error})", flush=True)
                continue
            print(f"assistant> {answer}", flush=True)
    finally:
        # Send the last turns to extraction before leaving.
        memory.close(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
