"""Writes carry an Idempotency-Key and are retried with it: a lost answer or a 5xx
never writes twice, never loses the write. Through a proxy in front of the real
service that breaks the first call."""

from __future__ import annotations

import uuid

import pytest

from tests.client.faults import FlakyProxy, refused_url
from timothy_client import Memory, ServiceUnavailable, Unreachable


def client_through(proxy: FlakyProxy, timothy, **options) -> Memory:
    return Memory(proxy.url, timothy.token, **options)


def test_it_writes_once_when_the_answer_is_lost(timothy, memory):
    content = f"Has a cat called Miso ({uuid.uuid4().hex[:8]})."
    with (
        FlakyProxy(timothy.public_url, "drop_answer") as proxy,
        client_through(proxy, timothy) as flaky,
    ):
        record = flaky.remember(content, "semantic")
    # The service got the request twice, with one key, and wrote once.
    [first, second] = proxy.forwarded
    assert first[2]["Idempotency-Key"] == second[2]["Idempotency-Key"]
    assert [r.id for r in memory.list(q=content) if r.content == content] == [record.id]


def test_it_acts_once_when_the_answer_is_lost(timothy, memory):
    old = memory.remember(f"Lives in Oslo ({uuid.uuid4().hex[:8]}).", "semantic")
    with (
        FlakyProxy(timothy.public_url, "drop_answer") as proxy,
        client_through(proxy, timothy) as flaky,
    ):
        # Without the key the retry would be a 409: already superseded.
        head = flaky.supersede(old.id, "Lives in Bergen.")
    assert len(proxy.forwarded) == 2
    chain = memory.chain(old.id)
    assert [version.id for version in chain.versions] == [old.id, head.id]


def test_it_retries_a_bad_gateway(timothy, memory):
    content = f"Plays the cello ({uuid.uuid4().hex[:8]})."
    with (
        FlakyProxy(timothy.public_url, "bad_gateway", failures=2) as proxy,
        client_through(proxy, timothy) as flaky,
    ):
        record = flaky.propose(content, "semantic")
    assert len(proxy.forwarded) == 1
    assert record.status == "proposed"


def test_it_gives_up_after_its_retries_with_a_typed_error(timothy):
    with (
        FlakyProxy(timothy.public_url, "bad_gateway", failures=10) as proxy,
        client_through(proxy, timothy, retries=2) as flaky,
        pytest.raises(ServiceUnavailable) as raised,
    ):
        flaky.remember("Anything.", "semantic")
    assert raised.value.status == 502
    assert proxy.forwarded == []
    assert proxy.failures_left == 10 - 3


def test_it_raises_unreachable_when_nothing_listens():
    with (
        Memory(refused_url(), "tm_token", retries=1) as client,
        pytest.raises(Unreachable) as raised,
    ):
        client.confirm(1)
    assert "connection refused" in str(raised.value)
