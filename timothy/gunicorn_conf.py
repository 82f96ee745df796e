"""gunicorn configuration of both listeners (`make run`; any deployment should
pass ``--config python:timothy.gunicorn_conf`` too).

Requests gunicorn refuses itself are answered with the API's JSON envelope,
like every other error (timothy/gunicorn_worker.py). ``SCRIPT_NAME`` (and
``PATH_INFO``) are never taken from request headers: gunicorn would by default
trust them from any client on 127.0.0.1, where `make run` listens, and a client
could then shift routing or make every request a 500. The service is always
mounted at ``/``.

The access log (``make run`` writes it to the console) and gunicorn's warnings
about requests it refuses show a request's path and the names of its query
parameters, never their values: ``GET /v1/memories?q=***`` (the query holds
the owner's words, timothy/access_log.py).

Each worker gives up on a database server that stopped answering, so that a
frozen PostgreSQL costs a request a few seconds and a 503, not a thread for as
long as the freeze lasts (``timothy.database.guard_against_stalls``).

Each worker loads the embedding model in the background as soon as it starts:
a cold local model takes seconds, longer than a retrieval leg may, so without
this the first recall of every worker would lose its vector leg.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("timothy.warmup")

worker_class = "timothy.gunicorn_worker.JsonErrorThreadWorker"
# The access log and gunicorn's warnings name a request's query parameters,
# never their values (timothy/access_log.py).
logger_class = "timothy.access_log.QueryMaskingLogger"
forwarder_headers = ""


def _warm_embeddings() -> None:
    from django.conf import settings

    if settings.EMBEDDING_PROVIDER == "none":
        return
    try:
        from retrieval.embeddings import get_provider

        provider = get_provider()
        if provider is not None:
            provider.embed(["warm-up"])
    except Exception:
        # Warming is best effort: recall degrades to the other legs on its own.
        logger.warning("Could not warm the embedding provider", exc_info=True)


def post_worker_init(worker) -> None:
    from timothy.database import guard_against_stalls

    guard_against_stalls()
    threading.Thread(target=_warm_embeddings, name="embedding-warmup", daemon=True).start()
