"""`python manage.py reembed`: (re)compute stored embeddings in batches.

Converts the vector column first when the configured model's dimension differs
from the stored one. Each batch is its own short transaction, so the service
keeps running; an interrupted run continues with ``--missing-only`` (after a
conversion) or ``--start-after`` (the id it printed).
"""

from __future__ import annotations

import os

from django.core.management.base import CommandError
from tqdm import tqdm

from memories.management.base import SchemaCommand, owner_by_username, positive_int
from retrieval.batch_embed import REEMBED_BATCH_ROWS, EmbeddingStopped, ReembedRefused, reembed
from retrieval.embeddings import EmbeddingError


class Command(SchemaCommand):
    help = "Re-embed memories in batches (converts the vector column if the dimension changed)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--owner", help="Only this owner's memories (username).")
        parser.add_argument(
            "--missing-only", action="store_true", help="Only memories without an embedding."
        )
        parser.add_argument(
            "--start-after", type=int, default=0, help="Skip memories up to this id (resume)."
        )
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=REEMBED_BATCH_ROWS,
            help=f"Memories per provider call and per transaction (default {REEMBED_BATCH_ROWS}).",
        )
        parser.add_argument(
            "--threads",
            type=positive_int,
            default=os.cpu_count() or 1,
            help="Threads of the local embedding model (default: every core; 1 leaves the "
            "other cores to a service running beside it).",
        )

    def handle(self, *args, **options) -> None:
        owner = owner_by_username(options["owner"]) if options["owner"] else None
        bar = None

        def progress(stored: int, total: int) -> None:
            nonlocal bar
            if bar is None:
                bar = tqdm(total=total, unit="memory", desc="Embedding", file=self.stderr._out)
            bar.update(stored)

        try:
            result = reembed(
                owner=owner,
                missing_only=options["missing_only"],
                start_after=options["start_after"],
                batch_size=options["batch_size"],
                threads=options["threads"],
                report=self.stdout.write,
                progress=progress,
            )
        except ReembedRefused as error:
            raise CommandError(str(error))
        except EmbeddingStopped as stop:
            if isinstance(stop.cause, KeyboardInterrupt):
                raise CommandError(
                    f"Interrupted after memory #{stop.last_id}. {stop.resume_hint()}"
                )
            failed = (
                "The embedding provider" if isinstance(stop.cause, EmbeddingError) else "Storing"
            )
            raise CommandError(
                f"{failed} failed after memory #{stop.last_id}: {stop} {stop.resume_hint()}"
            )
        finally:
            if bar is not None:
                bar.close()
        built = result.index_seconds
        self.stdout.write(
            f"Embedded {result.embedded} memories with {result.provider!r} in "
            f"{result.seconds:.1f} s"
            + (f" (of which {built:.1f} s building the vector index)." if built else ".")
        )
