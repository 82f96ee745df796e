"""Extraction during an outage: kept in a bounded queue on disk where the client
runs, and sent, oldest first, when the service answers again."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from tests.client.faults import FlakyProxy, refused_url
from tests.client.service import Fact, RunningService, wait_for
from timothy_client import Memory

EXTRACTION_WAIT = 180  # the service's worker polls its queue; the machine is shared
NEVER = 3600.0  # no timed retry: the test says what makes the queue go


def turn(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def queued_texts(client: Memory) -> list[str]:
    return [entry["body"]["turns"][0]["content"] for entry in client.queue.entries()]


def down_client(tmp_path, **options) -> Memory:
    down = refused_url()
    return Memory(
        down,
        "tm_token",
        internal_url=down,
        service_token="s",
        owner="o",
        retries=0,
        queue_dir=tmp_path,
        queue_retry_interval=NEVER,
        **options,
    )


@pytest.fixture
def own_service(extraction_llm):
    """A service of this test's own, since the test stops it."""
    service = RunningService(llm_base_url=extraction_llm.base_url).start()
    yield service
    service.remove()


def test_nothing_said_during_an_outage_is_lost_and_order_is_kept(
    own_service, extraction_llm, tmp_path
):
    service = own_service
    words = [f"Quetzal{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for word in words:
        extraction_llm.teach(Fact((word,), "semantic", f"The owner birdwatches at {word}."))
    session = "outage-" + uuid.uuid4().hex

    def client() -> Memory:
        return Memory(
            service.public_url,
            service.token,
            timeout=30,
            internal_url=service.internal_url,
            service_token=service.service_token,
            owner=service.owner,
            session_id=session,
            queue_dir=tmp_path,
            queue_retry_interval=NEVER,
        )

    service.stop()
    # One chat run says two things and ends while the service is away...
    first = client()
    sent = [first.extract(turn(f"I go birdwatching at {word}.")) for word in words[:2]]
    assert [future.result(timeout=120) for future in sent] == [False, False]
    first.close()
    # ...the next one starts (its try of the queue fails) and says a third.
    second = client()
    assert second.extract(turn(f"I go birdwatching at {words[2]}.")).result(timeout=120) is False
    texts = [f"I go birdwatching at {word}." for word in words]
    assert queued_texts(second) == texts
    keys = [entry["key"] for entry in second.queue.entries()]
    assert len(set(keys)) == 3

    service.start()
    # The first call the service answers sends the queue.
    assert second.recall("birdwatching").ok
    wait_for(lambda: not second.queue.entries(), "the queue to be sent", EXTRACTION_WAIT)
    proposed = wait_for(
        lambda: (
            (found := list(second.list(status="proposed", session_id=session)))
            and len(found) == 3
            and found
        ),
        "three proposals",
        EXTRACTION_WAIT,
    )
    assert sorted(memory.content for memory in proposed) == sorted(
        f"The owner birdwatches at {word}." for word in words
    )
    # Sent oldest first: the service's worker met them in the order they were said.
    conversations = [
        next(index for index, word in enumerate(words) if word in text)
        for text in extraction_llm.conversations()
        if any(word in text for word in words)
    ]
    assert conversations == [0, 1, 2]
    second.close()


def test_a_timed_retry_sends_the_queue_with_its_idempotency_key(timothy, tmp_path):
    # A proxy's 502 page first (the service never sees it), then the real service.
    with FlakyProxy(timothy.internal_url, "bad_gateway", failures=1) as proxy:
        client = Memory(
            timothy.public_url,
            timothy.token,
            internal_url=proxy.url,
            service_token=timothy.service_token,
            owner=timothy.owner,
            queue_dir=tmp_path,
            queue_retry_interval=1,
        )
        assert client.extract(turn("I like kites.")).result(timeout=120) is False
        [entry] = client.queue.entries()
        # Nobody calls: the client tries again on its own.
        wait_for(lambda: not client.queue.entries(), "the timed retry", 120)
        client.close()
    assert [
        (method, path, headers["Idempotency-Key"]) for method, path, headers in proxy.forwarded
    ] == [("POST", "/internal/v1/extract", entry["key"])]


def test_the_queue_keeps_the_newest_when_full(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "timothy_client")
    client = down_client(tmp_path, queue_max_entries=2)
    for text in ("one", "two", "three"):
        assert client.extract(turn(f"Turn {text}.")).result(timeout=120) is False
    assert queued_texts(client) == ["Turn two.", "Turn three."]
    assert any("dropped the 1 oldest" in record.message for record in caplog.records)
    client.close()


def test_the_queue_is_bounded_in_bytes(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "timothy_client")
    client = down_client(tmp_path, queue_max_bytes=1500)
    for number in range(6):
        client.extract(turn(f"Turn {number}: " + "words " * 40)).result(timeout=120)
    assert client.queue.path.stat().st_size <= 1500
    texts = queued_texts(client)
    assert texts and texts[-1].startswith("Turn 5:")
    assert texts == sorted(texts)
    # Readable by the one who runs the client only: it holds the conversation.
    assert client.queue.path.stat().st_mode & 0o077 == 0
    client.close()


def test_a_refused_extraction_is_not_queued(timothy, tmp_path):
    # A 4xx (no such owner) will never succeed: dropped, not kept forever.
    client = Memory(
        timothy.public_url,
        timothy.token,
        internal_url=timothy.internal_url,
        service_token=timothy.service_token,
        owner="nobody-" + uuid.uuid4().hex[:8],
        queue_dir=tmp_path,
        queue_retry_interval=NEVER,
    )
    assert client.extract(turn("I like kites.")).result(timeout=120) is False
    assert client.queue.entries() == []
    client.close()


def test_a_queue_line_that_cannot_be_read_is_skipped(tmp_path):
    client = down_client(tmp_path)
    client.extract(turn("Kept.")).result(timeout=120)
    with client.queue.path.open("a") as handle:
        handle.write("{not json\n")
    client.extract(turn("Also kept.")).result(timeout=120)
    assert queued_texts(client) == ["Kept.", "Also kept."]
    assert all(json.loads(line) for line in client.queue.path.read_text().splitlines())
    client.close()
