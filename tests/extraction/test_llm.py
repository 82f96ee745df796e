from __future__ import annotations

import pytest

from memories import llm
from tests.fakes.openai_server import CHAT, Answer, chat_answer

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def ask() -> dict:
    return llm.complete_json("system text", "user text", schema_name="thing", schema=SCHEMA)


def test_it_sends_a_strict_json_schema(fake_llm):
    fake_llm.queue(CHAT, chat_answer({"x": 1}))
    assert ask() == {"x": 1}
    [request] = fake_llm.requests_to(CHAT)
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert request.json["model"] == "fake-model"
    assert request.json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True},
    }
    assert [m["role"] for m in request.json["messages"]] == ["system", "user"]


def test_it_needs_a_base_url(settings):
    settings.LLM_BASE_URL = ""
    with pytest.raises(llm.LLMNotConfigured, match="TIMOTHY_LLM_BASE_URL"):
        ask()


def test_it_retries_on_429(fake_llm):
    fake_llm.queue(CHAT, Answer(status=429, body="{}"), chat_answer({"x": 2}))
    fake_llm_timeout_long_enough = ask()
    assert fake_llm_timeout_long_enough == {"x": 2}
    assert len(fake_llm.requests_to(CHAT)) == 2


def test_it_does_not_retry_on_400(fake_llm):
    fake_llm.queue(CHAT, Answer(status=400, json={"error": {"message": "bad schema"}}))
    with pytest.raises(llm.LLMError, match="400"):
        ask()
    assert len(fake_llm.requests_to(CHAT)) == 1


def test_it_times_out(fake_llm, settings):
    settings.LLM_TIMEOUT = 0.3
    fake_llm.queue(CHAT, Answer(json={}, delay=2.0))
    with pytest.raises(llm.LLMError, match="did not answer within"):
        ask()


@pytest.mark.parametrize(
    "answer, message",
    [
        (chat_answer('{"x": 1'), "not JSON"),
        (chat_answer("[1, 2]"), "not an object"),
        (chat_answer(None), "no text"),
        (chat_answer(None, refusal="I can't help with that."), "refused"),
        (Answer(json={"object": "error"}), "not a chat completion"),
        (Answer(body="<html>gateway</html>"), "not a chat completion"),
    ],
    ids=["truncated", "array", "empty", "refusal", "not-completion", "html"],
)
def test_it_rejects_unusable_answers(fake_llm, answer, message):
    fake_llm.queue(CHAT, answer)
    with pytest.raises(llm.LLMError, match=message):
        ask()
