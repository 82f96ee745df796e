"""A small client for OpenAI-compatible chat completions with JSON-schema output.

Extraction and consolidation ask one question each and want one JSON object
back. Every failure, timeout, refusal or unusable answer becomes ``LLMError``
so that callers can log it and write nothing.
"""

from __future__ import annotations

import json
import time

import requests
from django.conf import settings

from timothy import http_retry

# Retries on 429/5xx only, with exponential backoff from 1 s, never more than 10 s.
BACKOFF = http_retry.Backoff(retries=2, base=1.0, cap=10.0)


class LLMError(Exception):
    """The model failed, timed out, or answered something unusable."""


class LLMNotConfigured(LLMError):
    """No LLM base URL is configured."""

    def __init__(self) -> None:
        super().__init__(
            "No LLM is configured: set TIMOTHY_LLM_BASE_URL (and TIMOTHY_LLM_MODEL, "
            "TIMOTHY_LLM_API_KEY) to an OpenAI-compatible chat completions API."
        )


def is_configured() -> bool:
    return bool(settings.LLM_BASE_URL)


def complete_json(
    system: str,
    user: str,
    *,
    schema_name: str,
    schema: dict,
    timeout: float | None = None,
) -> dict:
    """Ask the configured model and return its answer parsed as a JSON object.

    ``timeout`` bounds the whole call, retries included (default: the
    LLM_TIMEOUT setting). The schema is sent as a strict ``json_schema``
    response format; the answer is still checked here, because not every
    compatible server enforces it.
    """
    if not is_configured():
        raise LLMNotConfigured()
    url = settings.LLM_BASE_URL.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if settings.LLM_API_KEY:
        headers["Authorization"] = f"Bearer {settings.LLM_API_KEY}"
    body = {
        "model": settings.LLM_MODEL,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        },
    }
    budget = settings.LLM_TIMEOUT if timeout is None else timeout
    try:
        response = http_retry.post_json(
            url,
            body,
            headers=headers,
            backoff=BACKOFF,
            deadline=time.monotonic() + budget,
            service="LLM",
        )
    except http_retry.TimedOut:
        raise LLMError(f"The LLM did not answer within {budget:.1f} s.")
    except http_retry.Unreachable as error:
        raise LLMError(f"The LLM request to {url} failed: {error}")
    except http_retry.NoTimeToRetry as error:
        raise LLMError(f"The LLM answered {error.status}; no time left to retry.")
    if response.status_code != 200:
        raise LLMError(f"The LLM answered {response.status_code}: {response.text[:300]}")
    return _parse(response)


def _parse(response: requests.Response) -> dict:
    try:
        message = response.json()["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise LLMError(f"The LLM's answer is not a chat completion: {error}")
    if message.get("refusal"):
        raise LLMError(f"The LLM refused: {message['refusal'][:300]}")
    content = message.get("content")
    if not isinstance(content, str):
        raise LLMError("The LLM's answer has no text content.")
    try:
        parsed = json.loads(content)
    except ValueError as error:
        raise LLMError(f"The LLM's answer is not JSON: {error}; it began {content[:120]!r}")
    if not isinstance(parsed, dict):
        raise LLMError("The LLM's answer is JSON but not an object.")
    return parsed
