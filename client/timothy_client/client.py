"""``Memory``: the Timothy Memory API from Python, with the degradation contract built in.

Two kinds of calls:

- On the user's turn: ``recall`` (returns an empty ``Recall`` instead of
  raising, within a hard deadline) and ``extract`` (queued on a background
  thread; returns at once). Neither can fail or slow the turn. An extraction
  the service cannot take waits in a small queue on disk (``outbox``) and is
  sent, oldest first, once the service answers again.
- Asked for on purpose: ``remember``, ``propose``, ``confirm``, ``reject``,
  ``reconfirm``, ``archive``, ``supersede``, ``chain``, ``list``, ``search``
  (``recall`` that raises). ``remember`` and ``propose`` answer with what the
  new memory repeats or may update (``related``, ``notes``). These raise
  the typed errors of ``timothy_client.errors``. Every write carries an
  ``Idempotency-Key`` and is retried with the same key on a lost connection,
  a timeout or a 5xx, so a retry never writes twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import requests
from requests.adapters import HTTPAdapter

from timothy_client import errors
from timothy_client.models import Chain, MemoryRecord, Recall
from timothy_client.outbox import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ENTRIES,
    ExtractionQueue,
    default_queue_dir,
)
from timothy_client.tools import REMEMBER, TOOL_NAMES, parse_arguments, remember_schema, validate

logger = logging.getLogger("timothy_client")

Phase = Literal["turn_end", "pre_compaction"]
PHASES: tuple[str, ...] = ("turn_end", "pre_compaction")
Pipeline = Literal["fusion", "freshness"]

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_INTERNAL_URL = "http://127.0.0.1:8001"
# A recall that has not answered by then is given up: the turn goes on without memories.
DEFAULT_RECALL_TIMEOUT = 0.5
DEFAULT_WRITE_TIMEOUT = 10.0
DEFAULT_EXTRACT_TIMEOUT = 10.0
# Extra attempts after the first, for writes, reads and extraction.
DEFAULT_RETRIES = 2
RETRY_BACKOFF = 0.25  # seconds, doubled per attempt
RETRY_BACKOFF_CAP = 2.0
RETRIED_STATUSES = frozenset({500, 502, 503, 504})
# 5xx answers that no retry can change.
PERMANENT_ERROR_CODES = frozenset({"llm_not_configured", "service_token_not_configured"})
# The service's default longest query; a longer message is cut, not refused.
MAX_QUERY_CHARS = 4000
# Extractions waiting to be sent; past this, new ones are dropped (and logged)
# rather than piling up while the service is away.
MAX_PENDING_EXTRACTIONS = 100
# While extractions wait on disk, how often the client tries the service again
# (besides after any call that the service answered).
DEFAULT_QUEUE_RETRY_INTERVAL = 30.0
EXTRACT_PATH = "/internal/v1/extract"
# What became of one extraction request.
# OFF: nothing this client sends can be taken (no LLM, a refused token).
SENT, LATER, REFUSED, OFF = "sent", "later", "refused", "off"
PAGE_SIZE = 50


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a tool call, to hand back to the model as the tool's result.

    ``content`` is the JSON text for the tool message; ``ok`` is False when
    the arguments were wrong or the service could not save (``error`` says
    which, in words the model can act on).
    """

    ok: bool
    content: str
    memory: MemoryRecord | None = None
    error: str | None = None


class Memory:
    """A client of one Timothy Memory service, for one owner.

    ``base_url`` and ``token`` reach the public API (the owner's bearer token).
    ``internal_url``, ``service_token`` and ``owner`` (a username) reach the
    internal listener: recall uses it when no ``token`` is given. Extraction
    goes to the internal listener with the service token and ``owner``, or,
    with no service token, with the owner's ``token`` (its propose scope; the
    owner is the token's). ``timeout`` bounds a whole recall (default 0.5 s).

    Extractions the service could not take (unreachable, or a 5xx a retry can
    change) are kept in a bounded file under ``queue_dir`` (default
    ``TIMOTHY_CLIENT_QUEUE_DIR`` or ``~/.cache/timothy-client``;
    ``queue=False``: dropped instead) and sent, oldest first, when a call is
    answered again, every ``queue_retry_interval`` seconds, or when a client
    for the same service and owner starts.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_RECALL_TIMEOUT,
        internal_url: str | None = None,
        service_token: str | None = None,
        owner: str | None = None,
        session_id: str | None = None,
        token_budget: int | None = None,
        pipeline: Pipeline | None = None,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        extract_timeout: float = DEFAULT_EXTRACT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        queue: bool = True,
        queue_dir: str | os.PathLike[str] | None = None,
        queue_max_entries: int = DEFAULT_MAX_ENTRIES,
        queue_max_bytes: int = DEFAULT_MAX_BYTES,
        queue_retry_interval: float = DEFAULT_QUEUE_RETRY_INTERVAL,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.internal_url = internal_url.rstrip("/") if internal_url else None
        self.service_token = service_token
        self.owner = owner
        self.session_id = session_id
        self.token_budget = token_budget
        self.pipeline = pipeline
        self.write_timeout = write_timeout
        self.extract_timeout = extract_timeout
        self.retries = retries
        self._http = requests.Session()
        self._http.mount("http://", HTTPAdapter(pool_maxsize=16))
        self._http.mount("https://", HTTPAdapter(pool_maxsize=16))
        self._http.headers["User-Agent"] = "timothy-client/0.1"
        # Recalls run on these threads so that the caller can stop waiting at
        # the deadline whatever the socket is doing.
        self._recall_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="timothy-recall")
        # One thread: extractions leave in the order the turns happened.
        self._extract_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="timothy-extract")
        self._pending: set[Future[bool]] = set()
        self._pending_lock = threading.Lock()
        self._warned_unconfigured = False
        self._closed = False
        self.queue: ExtractionQueue | None = None
        self.queue_retry_interval = queue_retry_interval
        self._queue_waiting = False  # something may be on disk
        self._drain_scheduled = False
        self._retry_timer: threading.Timer | None = None
        self._retry_armed = False
        # Why extraction is off for good (the service said no LLM, say); None: on.
        self._extraction_off: str | None = None
        if queue and self._extract_configured():
            self.queue = ExtractionQueue(
                Path(queue_dir) if queue_dir is not None else default_queue_dir(),
                f"{self.internal_url}{EXTRACT_PATH}",
                self._extract_identity(),
                max_entries=queue_max_entries,
                max_bytes=queue_max_bytes,
            )
            try:
                waiting = len(self.queue) > 0
            except OSError as error:
                logger.warning("Extraction queue %s cannot be read: %s", self.queue.path, error)
                waiting = False
            if waiting:
                # Left by an earlier run: try now, the service may be back.
                self._queue_waiting = True
                self._schedule_drain()

    @classmethod
    def from_env(cls, **overrides: Any) -> Memory:
        """Build a client from the environment (``TIMOTHY_URL``, ``TIMOTHY_TOKEN``, ...).

        See docs/client.md for the variables; keyword arguments win over them.
        """
        env = os.environ
        settings: dict[str, Any] = {
            "base_url": env.get("TIMOTHY_URL") or DEFAULT_URL,
            "token": env.get("TIMOTHY_TOKEN") or None,
            "internal_url": env.get("TIMOTHY_INTERNAL_URL") or DEFAULT_INTERNAL_URL,
            "service_token": env.get("TIMOTHY_SERVICE_TOKEN") or None,
            # With the service token, the owner is named (default "owner"); with
            # the owner's token alone, the token says whose it is.
            "owner": env.get("TIMOTHY_OWNER_USERNAME")
            or ("owner" if env.get("TIMOTHY_SERVICE_TOKEN") else None),
        }
        if env.get("TIMOTHY_CLIENT_TIMEOUT"):
            settings["timeout"] = float(env["TIMOTHY_CLIENT_TIMEOUT"])
        settings.update(overrides)
        return cls(**settings)

    # -- on the user's turn -------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        session_id: str | None = None,
        token_budget: int | None = None,
        pipeline: Pipeline | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> Recall:
        """The memories relevant to ``query`` and their fenced block. Never raises.

        On a timeout, a refused connection, an error answer or a malformed
        one, returns an empty ``Recall`` whose ``error`` says why (also logged
        as a warning): the turn goes on without memories.
        """
        limit = self.timeout if timeout is None else timeout
        try:
            return self.search(
                query,
                session_id=session_id,
                token_budget=token_budget,
                pipeline=pipeline,
                types=types,
                timeout=limit,
            )
        except errors.ServiceError as error:
            reason = f"the service answered {error.status} {error.code}: {error.message}"
        except errors.TimothyError as error:
            reason = str(error)
        except Exception as error:  # the contract: nothing escapes into the turn
            logger.exception("Recall failed unexpectedly")
            reason = f"unexpected error: {error!r}"
        logger.warning("Recall failed, the turn goes on without memories: %s", reason)
        return Recall.failed(reason)

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        token_budget: int | None = None,
        pipeline: Pipeline | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> Recall:
        """``recall`` for a call made on purpose: the same deadline, but it raises.

        ``Unreachable`` when nothing answered within the deadline (or at all),
        a ``ServiceError`` when the service said no (a 4xx is the caller's to
        fix; a 5xx means it cannot answer now), ``MalformedAnswer``.
        """
        limit = self.timeout if timeout is None else timeout
        body = self._search_body(query, session_id, token_budget, pipeline, types)
        if body is None:
            return Recall()
        future = self._recall_pool.submit(self._search, body, limit)
        try:
            return future.result(timeout=limit)
        except FutureTimeout:
            raise errors.Unreachable(f"no answer within {limit:g} s") from None

    def extract(
        self,
        turns: Iterable[Mapping[str, Any]],
        phase: Phase = "turn_end",
        *,
        session_id: str | None = None,
    ) -> Future[bool]:
        """Send turns (``{"role", "content", "at"?}``) to extraction, in the background.

        Returns at once. The future resolves to True when the service took
        them (202), False when it could not (logged; never raised). Use
        ``phase="pre_compaction"`` for turns about to be dropped from context.
        """
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, not {phase!r}")
        payload = [_turn_payload(turn) for turn in turns]
        payload = [turn for turn in payload if turn["content"].strip()]
        if not payload or not self._can_extract():
            return _done(False)
        body = {
            "session_id": session_id or self.session_id or "timothy-client",
            "phase": phase,
            "turns": payload,
        }
        if self.owner:
            body = {"owner": self.owner, **body}
        with self._pending_lock:
            if len(self._pending) >= MAX_PENDING_EXTRACTIONS:
                logger.warning(
                    "Extraction dropped: %d still waiting to be sent", len(self._pending)
                )
                return _done(False)
            future = self._extract_pool.submit(self._send_extraction, body, _new_key())
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for extractions in flight to be sent or queued on disk; True if none is left."""
        with self._pending_lock:
            pending = set(self._pending)
        return not wait_for_futures(pending, timeout=timeout).not_done

    def close(self, timeout: float | None = 30.0) -> None:
        """Send what is in flight (waiting at most ``timeout``), then release the connections.

        What the service could not take stays in the queue on disk, for the
        next client of the same service and owner.
        """
        self.flush(timeout)
        with self._pending_lock:
            self._closed = True
            if self._retry_timer is not None:
                self._retry_timer.cancel()
        self._extract_pool.shutdown(wait=False, cancel_futures=True)
        self._recall_pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the model's tool ---------------------------------------------------

    def handle_tool_call(
        self, name: str, arguments: str | dict[str, Any] | None, *, call_id: str | None = None
    ) -> ToolResult:
        """Run a ``remember`` tool call (OpenAI JSON-string or Anthropic object arguments).

        Never raises: a wrong call or a failed save comes back as
        ``ToolResult(ok=False)`` with an explanation to give to the model.
        ``call_id`` (the tool call's id) becomes the Idempotency-Key, so a
        retried turn saves once.
        """
        if name not in TOOL_NAMES:
            known = ", ".join(sorted(TOOL_NAMES))
            return _tool_failure(f"Unknown tool {name!r}; this client handles: {known}.")
        try:
            # A copy: the caller's arguments object (Anthropic's input) stays as it was.
            fields = {"mode": REMEMBER, **parse_arguments(arguments)}
            schema = remember_schema()
            unknown = [name for name in fields if name not in schema["properties"]]
            if unknown:
                raise errors.InvalidToolCall(
                    f"{REMEMBER} takes no argument {', '.join(map(repr, unknown))}; its "
                    f"arguments are {', '.join(schema['properties'])}."
                )
            validate(fields, schema)
            key = _key_from_call_id(call_id) if call_id else None
            memory = self._create(fields, idempotency_key=key)
        except errors.InvalidToolCall as error:
            return _tool_failure(f"Invalid arguments: {error}")
        except errors.ServiceError as error:
            return _tool_failure(f"The memory service refused it: {error.message}")
        except errors.TimothyError as error:
            return _tool_failure(f"The memory service could not be reached: {error}")
        content: dict[str, Any] = {
            "saved": True,
            "id": memory.id,
            "type": memory.type,
            "content": memory.content,
        }
        if memory.related:
            # What the fact repeats or may update, and what to tell the user about it.
            content["related"] = [
                {"id": item.id, "relation": item.relation, "content": item.content}
                for item in memory.related
            ]
            content["notes"] = memory.notes
        return ToolResult(ok=True, content=json.dumps(content, ensure_ascii=False), memory=memory)

    # -- asked for on purpose -----------------------------------------------

    def remember(
        self,
        content: str,
        type: str,
        *,
        entities: Iterable[str] | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> MemoryRecord:
        """Store the owner's explicit fact: active at once, confidence 1."""
        fields = {"content": content, "type": type, "mode": "remember"}
        if entities is not None:
            fields["entities"] = list(entities)
        if session_id:
            fields["session_id"] = session_id
        return self._create(fields, idempotency_key=idempotency_key)

    def propose(
        self,
        content: str,
        type: str,
        *,
        entities: Iterable[str] | None = None,
        confidence: float | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> MemoryRecord:
        """Stage a memory in the owner's confirmation queue."""
        fields: dict[str, Any] = {"content": content, "type": type, "mode": "propose"}
        if entities is not None:
            fields["entities"] = list(entities)
        if confidence is not None:
            fields["confidence"] = confidence
        if session_id:
            fields["session_id"] = session_id
        return self._create(fields, idempotency_key=idempotency_key)

    def confirm(
        self,
        memory_id: int,
        *,
        replaces: int | None = None,
        reason: str | None = None,
        copies: Iterable[int] | None = None,
    ) -> MemoryRecord:
        """proposed -> active.

        With ``replaces`` (an active memory's id, e.g. from ``related``), the
        proposal becomes that memory's new version: ``IllegalTransition`` (409)
        if it is no longer active, with ``head_id`` when it was superseded.
        ``copies``: other proposals of the same fact (``related`` with status
        proposed), rejected as its duplicates in the same decision; the answer's
        ``raw["settled_copies"]`` names those that were still pending.
        """
        extra: dict[str, Any] = {} if replaces is None else {"replaces": int(replaces)}
        if copies is not None:
            extra["copies"] = [int(copy) for copy in copies]
        return self._act(memory_id, "confirm", reason, **extra)

    def reject(
        self, memory_id: int, *, reason: str | None = None, copies: Iterable[int] | None = None
    ) -> MemoryRecord:
        """proposed -> rejected (kept, never retrieved); ``copies`` as for ``confirm``."""
        extra = {} if copies is None else {"copies": [int(copy) for copy in copies]}
        return self._act(memory_id, "reject", reason, **extra)

    def reconfirm(self, memory_id: int, *, reason: str | None = None) -> MemoryRecord:
        """Say an active memory is still true (resets its decay)."""
        return self._act(memory_id, "reconfirm", reason)

    def archive(self, memory_id: int, *, reason: str | None = None) -> MemoryRecord:
        """active -> archived (kept, never retrieved)."""
        return self._act(memory_id, "archive", reason)

    def supersede(
        self,
        memory_id: int,
        content: str,
        *,
        type: str | None = None,
        entities: Iterable[str] | None = None,
        confidence: float | None = None,
        reason: str | None = None,
    ) -> MemoryRecord:
        """Replace a memory with a new version; returns the new head of the chain."""
        extra: dict[str, Any] = {"content": content}
        if type is not None:
            extra["type"] = type
        if entities is not None:
            extra["entities"] = list(entities)
        if confidence is not None:
            extra["confidence"] = confidence
        return self._act(memory_id, "supersede", reason, **extra)

    def chain(self, memory_id: int) -> Chain:
        """Every version of the memory's chain, oldest first, with their events."""
        answer = self._request("GET", f"/v1/memories/{int(memory_id)}/chain")
        return Chain.from_json(answer)

    def list(
        self,
        *,
        status: str = "active",
        type: str | None = None,
        entity: str | None = None,
        q: str | None = None,
        session_id: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> Iterator[MemoryRecord]:
        """The owner's memories, newest first, fetched page by page as you iterate."""
        params: dict[str, Any] = {"status": status, "limit": page_size}
        for name, value in (
            ("type", type),
            ("entity", entity),
            ("q", q),
            ("session_id", session_id),
        ):
            if value is not None:
                params[name] = value
        while True:
            answer = self._request("GET", "/v1/memories", params=params)
            try:
                items, cursor = answer["memories"], answer["next_cursor"]
            except (KeyError, TypeError) as error:
                raise errors.MalformedAnswer(f"Not a page of memories: {error!r}") from error
            for item in items:
                yield MemoryRecord.from_json(item)
            if not cursor:
                return
            params["cursor"] = cursor

    # -- plumbing -----------------------------------------------------------

    def _search_body(
        self,
        query: str,
        session_id: str | None,
        token_budget: int | None,
        pipeline: str | None,
        types: Iterable[str] | None,
    ) -> dict[str, Any] | None:
        query = (query or "").strip()
        if not query:
            return None
        body: dict[str, Any] = {"query": query[:MAX_QUERY_CHARS]}
        optional = {
            "session_id": session_id or self.session_id,
            "token_budget": token_budget or self.token_budget,
            "pipeline": pipeline or self.pipeline,
            "types": list(types) if types is not None else None,
        }
        body.update({name: value for name, value in optional.items() if value is not None})
        return body

    def _search(self, body: dict[str, Any], timeout: float) -> Recall:
        if self.token:
            answer = self._request(
                "POST", "/v1/memories/search", json=body, timeout=timeout, attempts=1
            )
        elif self._internal_configured():
            answer = self._request(
                "POST",
                "/internal/v1/retrieve",
                json={**body, "owner": self.owner},
                timeout=timeout,
                internal=True,
                attempts=1,
            )
        else:
            raise errors.TimothyError(
                "not configured: give a token, or internal_url, service_token and owner"
            )
        return Recall.from_json(answer)

    def _internal_configured(self) -> bool:
        return bool(self.internal_url and self.service_token and self.owner)

    def _extract_configured(self) -> bool:
        return self._internal_configured() or bool(
            self.internal_url and self.token and not self.service_token
        )

    def _extract_identity(self) -> str:
        """Whose extractions these are: the owner's name, or the token's digest."""
        if self.service_token or not self.token:
            return f"owner:{self.owner}"
        return "token:" + hashlib.sha256(self.token.encode()).hexdigest()

    def _can_extract(self) -> bool:
        if self._extraction_off:
            return False
        if self._extract_configured():
            return True
        if not self._warned_unconfigured:
            logger.warning(
                "Extraction is off: it needs internal_url and the owner's token (or "
                "service_token and owner): TIMOTHY_INTERNAL_URL, TIMOTHY_TOKEN "
                "(or TIMOTHY_SERVICE_TOKEN, TIMOTHY_OWNER_USERNAME)."
            )
            self._warned_unconfigured = True
        return False

    def check_extraction(self) -> str | None:
        """Whether the service would take an extraction now: None if so, else why not.

        Sends a request with no turns, which the service refuses before
        queueing anything; its reason (no LLM configured, a token without the
        propose scope, nothing listening) comes back as a sentence.
        """
        if not self._extract_configured():
            return "extraction is not configured here: set TIMOTHY_INTERNAL_URL and TIMOTHY_TOKEN"
        body = {"owner": self.owner} if self.owner else {}
        try:
            self._request("POST", EXTRACT_PATH, json=body, internal=True, attempts=1, timeout=10)
        except errors.ServiceError as error:
            if error.status == 400 and error.code == "invalid_request":
                return None  # it got as far as reading the turns
            return f"the service answered {error.status} {error.code}: {error.message}"
        except errors.TimothyError as error:
            return f"the internal listener did not answer: {error}"
        return None

    def _send_extraction(self, body: dict[str, Any], key: str) -> bool:
        """On the extract thread: what waits on disk first, then this one (or queue it)."""
        if self._extraction_off:
            return False
        if self.queue is not None and self._queue_waiting and not self._drain_queue():
            if self._extraction_off:
                return False
            # The older ones could not go: this one waits behind them, in order.
            self._enqueue(body, key, "older extractions are still waiting")
            return False
        outcome, reason = self._post_extraction(body, key, attempts=None)
        if outcome == SENT:
            return True
        if outcome == LATER and self.queue is not None:
            self._enqueue(body, key, reason)
        elif outcome == OFF:
            self._switch_extraction_off(reason)
        else:
            logger.warning("Extraction (%s) was not sent: %s", body["phase"], reason)
        return False

    def _switch_extraction_off(self, reason: str) -> None:
        if not self._extraction_off:
            logger.warning(
                "Extraction is off for this client (recall and remember go on): %s", reason
            )
        self._extraction_off = reason

    def _post_extraction(
        self, body: dict[str, Any], key: str, *, attempts: int | None
    ) -> tuple[str, str]:
        """Send one extraction: SENT, LATER (a retry later may succeed) or REFUSED."""
        try:
            # Not repeated after a timeout here: the service may have queued it already.
            self._request(
                "POST",
                EXTRACT_PATH,
                json=body,
                idempotency_key=key,
                timeout=self.extract_timeout,
                internal=True,
                repeatable=False,
                attempts=attempts,
            )
        except errors.RateLimited as error:
            return LATER, f"the service answered {error.status}: {error.message}"
        except errors.ServiceError as error:
            reason = f"the service answered {error.status} {error.code}: {error.message}"
            if error.code in PERMANENT_ERROR_CODES or error.status in (401, 403):
                return OFF, reason
            later = error.status in RETRIED_STATUSES
            return (LATER if later else REFUSED), reason
        except errors.Unreachable as error:
            return LATER, str(error)
        except errors.TimothyError as error:
            return REFUSED, str(error)
        return SENT, ""

    def _enqueue(self, body: dict[str, Any], key: str, reason: str) -> None:
        assert self.queue is not None
        try:
            self.queue.append(key, body)
            waiting = len(self.queue)
        except OSError as error:
            logger.warning(
                "Extraction (%s) was not sent (%s) and cannot be queued in %s: %s",
                body["phase"],
                reason,
                self.queue.path,
                error,
            )
            return
        self._queue_waiting = True
        logger.warning(
            "Extraction (%s) was not sent: %s; queued on disk to send when the service "
            "answers again (%d waiting)",
            body["phase"],
            reason,
            waiting,
        )
        self._arm_retry()

    def _drain_queue(self) -> bool:
        """Send what waits on disk, oldest first; True when nothing is left."""
        assert self.queue is not None
        try:
            with self.queue.sending() as mine:
                if not mine:  # another process is sending this queue
                    self._arm_retry()
                    return False
                sent = 0
                while True:
                    entries = self.queue.entries()
                    if not entries:
                        self._queue_waiting = False
                        if sent:
                            logger.info("Sent %d queued extraction(s)", sent)
                        return True
                    entry = entries[0]
                    key = str(entry.get("key") or _new_key())
                    # One attempt each: the queue itself is the retry.
                    outcome, reason = self._post_extraction(entry["body"], key, attempts=1)
                    if outcome == LATER:
                        self._arm_retry()
                        return False
                    if outcome == OFF:
                        # Nothing in the queue can go: keep it for a client that can.
                        self._switch_extraction_off(reason)
                        return False
                    if outcome == REFUSED:
                        logger.warning("Queued extraction dropped: %s", reason)
                    else:
                        sent += 1
                    self.queue.remove(key)
        except OSError as error:
            logger.warning("Extraction queue %s cannot be used: %s", self.queue.path, error)
            return False

    def _drain_in_background(self) -> bool:
        with self._pending_lock:
            self._drain_scheduled = False
        return self._drain_queue() if self._queue_waiting else True

    def _schedule_drain(self) -> None:
        """Send the queue on the extract thread (in order with new extractions)."""
        with self._pending_lock:
            if self._closed or self._drain_scheduled or self.queue is None:
                return
            self._drain_scheduled = True
            future = self._extract_pool.submit(self._drain_in_background)
            self._pending.add(future)
        future.add_done_callback(self._forget)

    def _arm_retry(self) -> None:
        with self._pending_lock:
            if self._closed or self._retry_armed:
                return
            self._retry_armed = True
            self._retry_timer = threading.Timer(self.queue_retry_interval, self._retry_fired)
            self._retry_timer.daemon = True
            self._retry_timer.start()

    def _retry_fired(self) -> None:
        with self._pending_lock:
            self._retry_armed = False
        self._schedule_drain()

    def _service_answered(self) -> None:
        """A call was answered: if extractions wait on disk, send them now."""
        if self._queue_waiting and not self._drain_scheduled:
            self._schedule_drain()

    def _forget(self, future: Future[bool]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def _create(self, fields: dict[str, Any], *, idempotency_key: str | None) -> MemoryRecord:
        if self.session_id and "session_id" not in fields:
            fields = {**fields, "session_id": self.session_id}
        answer = self._request(
            "POST", "/v1/memories", json=fields, idempotency_key=idempotency_key or _new_key()
        )
        return MemoryRecord.from_json(answer)

    def _act(self, memory_id: int, action: str, reason: str | None, **extra: Any) -> MemoryRecord:
        body: dict[str, Any] = {"action": action, **extra}
        if reason:
            body["reason"] = reason
        answer = self._request(
            "POST", f"/v1/memories/{int(memory_id)}", json=body, idempotency_key=_new_key()
        )
        return MemoryRecord.from_json(answer)

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        internal: bool = False,
        attempts: int | None = None,
        repeatable: bool = True,
    ) -> Any:
        """One API call, retried (same Idempotency-Key) on lost connections and 5xx.

        ``repeatable=False``: retried only when the request cannot have
        arrived (connection refused), never after a timeout or a 5xx.
        """
        if internal:
            url = (self.internal_url or "") + path
            headers = {"Authorization": f"Bearer {self.service_token or self.token}"}
        else:
            url = self.base_url + path
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        attempts = attempts or 1 + self.retries
        timeout = timeout or self.write_timeout
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.request(
                    method, url, json=json, params=params, headers=headers, timeout=timeout
                )
            except requests.RequestException as error:
                failure = errors.Unreachable(f"{method} {url}: {_reason(error, timeout)}")
                retry = _never_arrived(error) or (repeatable and _transient(error))
                if attempt == attempts or not retry:
                    raise failure from error
            else:
                if response.status_code < 500 and path != EXTRACT_PATH:
                    self._service_answered()
                retry = repeatable and response.status_code in RETRIED_STATUSES
                if attempt == attempts or not retry:
                    return _answer(response)
                if _error_code(response) in PERMANENT_ERROR_CODES:
                    return _answer(response)
            logger.info("%s %s failed (attempt %d of %d); retrying", method, url, attempt, attempts)
            time.sleep(min(RETRY_BACKOFF * 2 ** (attempt - 1), RETRY_BACKOFF_CAP))
        raise AssertionError("the loop returns or raises")


def _answer(response: requests.Response) -> Any:
    if response.status_code < 400:
        try:
            return response.json()
        except ValueError as error:
            raise errors.MalformedAnswer(
                f"{response.request.method} {response.url} answered {response.status_code} "
                f"with something that is not JSON: {response.text[:120]!r}"
            ) from error
    code, message, details = "http_error", response.text[:300] or response.reason, {}
    try:
        envelope = response.json()["error"]
        code, message = str(envelope["code"]), str(envelope["message"])
        details = envelope.get("details") or {}
    except (ValueError, KeyError, TypeError):
        pass  # not our error envelope (a proxy's page): keep the text
    if response.status_code == 429:
        retry_after = response.headers.get("Retry-After")
        raise errors.RateLimited(
            429,
            code,
            message,
            details,
            retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
        )
    raise errors.error_class_for(response.status_code)(response.status_code, code, message, details)


def _error_code(response: requests.Response) -> str | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def _never_arrived(error: requests.RequestException) -> bool:
    """The request cannot have reached the service: no connection was made."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    return isinstance(error, requests.ConnectionError) and "NewConnectionError" in repr(error)


def _transient(error: requests.RequestException) -> bool:
    """A lost connection or a timeout: the request may or may not have arrived."""
    return isinstance(
        error,
        requests.ConnectionError | requests.Timeout | requests.exceptions.ChunkedEncodingError,
    )


def _reason(error: requests.RequestException, timeout: float) -> str:
    if isinstance(error, requests.Timeout):
        return f"no answer within {timeout:g} s"
    if "Connection refused" in repr(error):
        return "connection refused"
    if isinstance(error, requests.ConnectionError):
        return f"connection failed ({type(error).__name__}: {error})"
    return f"{type(error).__name__}: {error}"


def _turn_payload(turn: Mapping[str, Any]) -> dict[str, Any]:
    payload = {"role": str(turn["role"]), "content": str(turn.get("content") or "")}
    at = turn.get("at")
    if isinstance(at, datetime):
        at = at.isoformat()
    if at:
        payload["at"] = at
    return payload


def _new_key() -> str:
    return str(uuid.uuid4())


def _key_from_call_id(call_id: str) -> str:
    key = f"tool-call-{call_id}"
    if len(key) <= 200 and key.isascii() and key.isprintable() and " " not in key:
        return key
    return "tool-call-" + hashlib.sha256(call_id.encode()).hexdigest()


def _tool_failure(message: str) -> ToolResult:
    return ToolResult(
        ok=False, content=json.dumps({"saved": False, "error": message}), error=message
    )


def _done(value: bool) -> Future[bool]:
    future: Future[bool] = Future()
    future.set_result(value)
    return future
