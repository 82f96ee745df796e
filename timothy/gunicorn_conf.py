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

A fresh worker does not make a request wait on a load longer than the request
may take (timothy/warmup.py). gunicorn loads the application once, in its
master process (``preload_app``), with what a first request would otherwise
load (tiktoken's encoding, the API's views), and forks workers that have it
all: a worker that died is replaced in a fraction of a second, not the
seconds a fresh Python process takes to import Django. Each worker then loads
its own embedding model in the background (ONNX Runtime is not shared across
a fork); until it is loaded, recall answers without its vector leg (reported
as skipped: "the embedding model is still loading").
"""

from __future__ import annotations

import logging

logger = logging.getLogger("timothy.warmup")

worker_class = "timothy.gunicorn_worker.JsonErrorThreadWorker"
# The access log and gunicorn's warnings name a request's query parameters,
# never their values (timothy/access_log.py).
logger_class = "timothy.access_log.QueryMaskingLogger"
forwarder_headers = ""
# Import the application in the master; workers fork with it loaded. Nothing
# opens a database connection or a thread at import time (the pools start on
# first use), so nothing of the master's is shared by accident.
preload_app = True


def on_starting(server) -> None:
    """In the master, after the application is loaded and before the socket is
    bound: what a first request would load, loaded once for every worker."""
    from timothy.warmup import warm_before_accepting

    seconds = warm_before_accepting()
    logger.info("Application loaded and warmed in the master (%.2f s)", seconds)


def post_worker_init(worker) -> None:
    from timothy.database import guard_against_stalls
    from timothy.warmup import warm_before_accepting, warm_model_in_background

    guard_against_stalls()
    warm_before_accepting()  # done in the master already: this checks it is
    warm_model_in_background()
