"""What a web worker loads before and after it starts accepting requests.

A fresh gunicorn worker (``make run``, or one gunicorn restarted) must not
make a request wait for a load that takes longer than the request may:

- Before the worker accepts (``warm_before_accepting``, from gunicorn's
  ``post_worker_init``): what costs a first request a second or so and is cheap
  to do once — tiktoken's o200k_base encoding (packing counts tokens), the API's
  views and their imports.
- After it accepts (``warm_model_in_background``): the embedding model, which
  takes seconds (longer than a client waits for a recall). While it loads,
  ``retrieval.embeddings.model_loading()`` is true: recall answers without its vector leg (reported
  as ``skipped``: "the embedding model is still loading") and a create compares
  by entities and words only, instead of queueing behind the load until their
  deadlines. The first search after a start is then answered in the time of the
  other legs.

Outside gunicorn (the test client, management commands) nothing is warmed here
and ``model_loading()`` stays false: a caller that needs the model loads it.
"""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("timothy.warmup")


def warm_before_accepting() -> float:
    """Do the cheap first-request work now; the seconds it took. Best effort:
    whatever fails here a request does again (and reports) itself."""
    started = time.monotonic()
    try:
        from retrieval.tokens import count_tokens

        count_tokens("warm-up")
        import retrieval.recall  # noqa: F401
    except Exception:
        logger.warning("Could not warm the worker before it accepts", exc_info=True)
    try:
        from django.urls import resolve

        # The API's views and what they import; the internal listener has
        # routes of its own, and then this finds nothing, which is fine.
        resolve("/v1/memories/search")
    except Exception:
        pass
    return time.monotonic() - started


def warm_model_in_background() -> threading.Thread | None:
    """Load the embedding model on a thread of its own; ``model_loading()`` is
    true until it is loaded (or failed to load). None without a provider."""
    from django.conf import settings

    from retrieval import embeddings

    if settings.EMBEDDING_PROVIDER == "none":
        return None
    embeddings._model_loading.set()
    thread = threading.Thread(target=_load_model, name="embedding-warmup", daemon=True)
    thread.start()
    return thread


def _load_model() -> None:
    from retrieval import embeddings

    started = time.monotonic()
    try:
        provider = embeddings.get_provider()
        if provider is not None:
            provider.embed(["warm-up"])
        logger.info("Embedding model ready after %.1f s", time.monotonic() - started)
    except Exception:
        # Best effort: recall degrades to the other legs on its own.
        logger.warning("Could not warm the embedding provider", exc_info=True)
    finally:
        embeddings._model_loading.clear()
