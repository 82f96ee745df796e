"""gunicorn hooks for `make run`.

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
