"""extract: turns go to the internal listener in the background; the caller never
waits for it and never sees it fail."""

from __future__ import annotations

import logging
import uuid

import pytest

from tests.client.faults import refused_url, silent_server
from tests.client.service import Fact, wait_for
from timothy_client import Memory

EXTRACTION_WAIT = 120  # the service's worker polls its queue; the machine is shared


def proposals(client: Memory, session_id: str) -> list:
    return list(client.list(status="proposed", session_id=session_id))


def test_it_sends_a_turn_to_extraction_and_the_fact_is_proposed(fresh_memory, extraction_llm):
    pet = "Quokka-" + uuid.uuid4().hex[:6]
    extraction_llm.teach(Fact((pet,), "semantic", f"The owner has a pet quokka named {pet}."))
    session = "extract-" + uuid.uuid4().hex
    turns = [
        {
            "role": "user",
            "content": f"My pet quokka is called {pet}.",
            "at": "2026-11-30T10:00:00Z",
        },
        {"role": "assistant", "content": "What a lovely name!"},
    ]
    sent = fresh_memory.extract(turns, "turn_end", session_id=session)
    assert sent.result(timeout=EXTRACTION_WAIT) is True
    [proposed] = wait_for(lambda: proposals(fresh_memory, session), "the proposal", EXTRACTION_WAIT)
    assert proposed.content == f"The owner has a pet quokka named {pet}."
    assert (proposed.source, proposed.session_id) == ("extraction", session)
    [created] = fresh_memory.chain(proposed.id).versions[0].events
    assert created.reason == "extracted at turn_end from turn 0"


def test_it_returns_before_the_service_answers():
    with silent_server() as url:
        client = Memory(
            url, "tm_token", internal_url=url, service_token="s", owner="o", extract_timeout=600
        )
        sent = client.extract([{"role": "user", "content": "I like kites."}])
        # The service has not answered (it never will): the caller is already back.
        assert not sent.done()
    # The silent server is gone: the send fails, quietly.
    assert sent.result(timeout=120) is False


def test_it_never_raises_when_the_service_is_down(caplog):
    caplog.set_level(logging.WARNING, "timothy_client")
    down = refused_url()
    client = Memory(down, "tm_token", internal_url=down, service_token="s", owner="o", retries=1)
    sent = client.extract([{"role": "user", "content": "I like kites."}], "pre_compaction")
    assert sent.result(timeout=120) is False
    messages = [record.getMessage() for record in caplog.records]
    assert any("Extraction (pre_compaction) was not sent" in m for m in messages)


def test_it_skips_extraction_without_the_internal_settings(caplog):
    caplog.set_level(logging.WARNING, "timothy_client")
    client = Memory(refused_url(), "tm_token")
    for _ in range(2):
        assert client.extract([{"role": "user", "content": "I like kites."}]).result() is False
    warnings = [r.getMessage() for r in caplog.records if "Extraction is off" in r.getMessage()]
    assert len(warnings) == 1
    assert "TIMOTHY_SERVICE_TOKEN" in warnings[0]


def test_it_sends_nothing_for_empty_turns():
    client = Memory(refused_url(), internal_url=refused_url(), service_token="s", owner="o")
    assert client.extract([{"role": "assistant", "content": "  "}]).result() is False


def test_it_refuses_an_unknown_phase():
    with pytest.raises(ValueError, match="phase"):
        Memory().extract([{"role": "user", "content": "x"}], "whenever")
