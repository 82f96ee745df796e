"""The retry helper shared by the LLM client and the embeddings provider (timothy/http_retry.py)."""

from __future__ import annotations

import time

import pytest

from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import EMBEDDINGS, Answer
from timothy.http_retry import Backoff, NoTimeToRetry, TimedOut, Unreachable, post_json

QUICK = Backoff(retries=2, base=0.0, cap=0.0)


def post(server, backoff=QUICK, deadline=None, request_timeout=2.0):
    return post_json(
        server.base_url + "/embeddings",
        {"input": ["hello"]},
        headers={},
        backoff=backoff,
        deadline=deadline,
        request_timeout=request_timeout,
        service="Test service",
    )


def test_it_retries_busy_answers_until_one_is_not(fake_openai):  # noqa: F811
    fake_openai.queue(
        EMBEDDINGS, Answer(status=429, body="{}"), Answer(status=503, body="{}"), Answer(json={})
    )
    assert post(fake_openai).status_code == 200
    assert len(fake_openai.requests_to(EMBEDDINGS)) == 3


def test_it_returns_the_last_busy_answer_after_the_last_retry(fake_openai):  # noqa: F811
    fake_openai.queue(EMBEDDINGS, *[Answer(status=500, body="boom")] * 4)
    assert post(fake_openai).status_code == 500
    assert len(fake_openai.requests_to(EMBEDDINGS)) == 3


def test_it_does_not_retry_a_client_error(fake_openai):  # noqa: F811
    fake_openai.queue(EMBEDDINGS, Answer(status=400, body="bad"), Answer(json={}))
    assert post(fake_openai).status_code == 400
    assert len(fake_openai.requests_to(EMBEDDINGS)) == 1


def test_it_waits_what_retry_after_asks_only_when_told_to():
    assert Backoff(retries=1, base=0.5, cap=8.0).pause(1, "5") == 1.0
    assert Backoff(retries=1, base=0.5, cap=8.0, honour_retry_after=True).pause(1, "5") == 5.0
    assert Backoff(retries=1, base=0.5, cap=8.0, honour_retry_after=True).pause(1, "60") == 8.0
    assert Backoff(retries=1, base=0.5, cap=8.0, honour_retry_after=True).pause(0, "x") == 0.5


def test_it_gives_up_when_the_pause_would_pass_the_deadline(fake_openai):  # noqa: F811
    fake_openai.queue(EMBEDDINGS, Answer(status=429, body="{}"))
    slow = Backoff(retries=2, base=60.0, cap=60.0)
    with pytest.raises(NoTimeToRetry) as raised:
        post(fake_openai, backoff=slow, deadline=time.monotonic() + 30)
    assert raised.value.status == 429


def test_it_times_out_on_a_past_deadline(fake_openai):  # noqa: F811
    with pytest.raises(TimedOut):
        post(fake_openai, deadline=time.monotonic() - 1)
    assert fake_openai.requests_to(EMBEDDINGS) == []


def test_it_says_when_the_server_cannot_be_reached():
    with pytest.raises(Unreachable):
        post_json(
            "http://127.0.0.1:9/v1/embeddings",
            {},
            headers={},
            backoff=QUICK,
            deadline=None,
            request_timeout=2.0,
            service="Test service",
        )
