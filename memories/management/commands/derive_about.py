"""`python manage.py derive_about`: what each memory is about, for those written before."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from django.core.management.base import CommandError
from django.db import connection, transaction
from tqdm import tqdm

from memories import about_llm, llm
from memories.about import SET_BY_RULES, about_fields, derive_about, refined
from memories.management.base import SchemaCommand, owner_by_username, positive_int
from memories.models import Memory, owner_reading
from retrieval.embeddings import EmbeddingError, get_provider

BATCH_ROWS = 500
# LLM calls in flight at once for --llm: each waits on the network, not the CPU.
LLM_CONCURRENCY = 4


class Command(SchemaCommand):
    help = (
        "Read what each memory is about (whom or what, which aspect, and for an event which "
        "occasion) from its text, for memories that have no about yet (written before the "
        "store read them). Uses the stored vectors and the embedding model for an aspect no "
        "rule names. Never changes an about the owner set or an import carried. With --llm, "
        "the configured LLM reads them instead (one call per memory)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--owner", help="Only this owner's memories (username).")
        parser.add_argument(
            "--all",
            action="store_true",
            help="Also read again the memories whose about the rules wrote before (after an "
            "upgrade of the rules); the owner's corrections stay.",
        )
        parser.add_argument(
            "--llm",
            action="store_true",
            help="Have the configured LLM (TIMOTHY_LLM_BASE_URL) read every about the rules "
            "wrote, one call per memory; where it fails, the rules' reading stays.",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=LLM_CONCURRENCY,
            help=f"With --llm: calls in flight at once (default {LLM_CONCURRENCY}).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be written; write nothing."
        )

    def handle(self, *args, owner=None, dry_run=False, **options) -> None:
        if options["llm"]:
            self._read_with_llm(owner, dry_run, options["concurrency"])
            return
        rows = Memory.objects.exclude(status=Memory.Status.REDACTED)
        if owner:
            rows = rows.filter(owner=owner_by_username(owner))
        rows = (
            rows.filter(about_set_by__in=["", SET_BY_RULES])
            if options["all"]
            else rows.filter(about_kind="")
        )
        provider = _provider(self.stderr)
        total = rows.count()
        changed = 0
        last_id = 0
        # disable=None: no bar when the output is not a terminal.
        with tqdm(total=total, unit=" memories", file=self.stderr._out, disable=None) as bar:
            while True:
                batch = list(
                    rows.filter(pk__gt=last_id)
                    .select_related("owner")
                    .order_by("pk")
                    .defer("tsv")[:BATCH_ROWS]
                )
                if not batch:
                    break
                last_id = batch[-1].pk
                changed += self._derive(batch, provider, dry_run)
                bar.update(len(batch))
        verb = "Would write" if dry_run else "Wrote"
        self.stdout.write(
            f"{verb} what {changed} of {total} memories are about"
            + ("" if provider else " (rules only: no embedding provider for unnamed aspects)")
            + "."
        )

    def _read_with_llm(self, owner: str | None, dry_run: bool, concurrency: int) -> None:
        if not llm.is_configured():
            raise CommandError(str(llm.LLMNotConfigured()))
        rows = Memory.objects.exclude(status=Memory.Status.REDACTED).filter(
            about_set_by__in=["", SET_BY_RULES]
        )
        if owner:
            rows = rows.filter(owner=owner_by_username(owner))
        ids = list(rows.order_by("pk").values_list("pk", flat=True))
        if dry_run:
            self.stdout.write(f"Would ask the LLM what {len(ids)} memories are about.")
            return
        written, failures = 0, []
        with (
            tqdm(total=len(ids), unit=" memories", file=self.stderr._out, disable=None) as bar,
            ThreadPoolExecutor(max_workers=concurrency) as pool,
        ):
            # One at a time on this thread (and its transaction); else on the pool's.
            outcomes = map(_read, ids) if concurrency == 1 else pool.map(_read_one, ids)
            for memory_id, outcome in zip(ids, outcomes, strict=True):
                if isinstance(outcome, llm.LLMError):
                    failures.append((memory_id, outcome))
                else:
                    written += outcome
                bar.update(1)
        self.stdout.write(f"The LLM read what {written} of {len(ids)} memories are about.")
        if failures:
            memory_id, error = failures[0]
            self.stderr.write(
                f"{len(failures)} failed and keep the rules' reading (the first, memory "
                f"{memory_id}: {error}). Run the command again to retry them."
            )

    @staticmethod
    def _derive(batch: list[Memory], provider, dry_run: bool) -> int:
        changed = 0
        readings: dict[int, dict] = {}
        with transaction.atomic():
            for memory in batch:
                if memory.owner_id not in readings:
                    readings[memory.owner_id] = owner_reading(memory.owner)
                about = derive_about(
                    memory.content,
                    memory.type,
                    entities=tuple(memory.entity_refs),
                    written=memory.created_at,
                    **readings[memory.owner_id],
                )
                if provider is not None and memory.embedding is not None:
                    about = refined(about, memory.type, memory.embedding, provider)
                fields = about_fields(about)
                if all(getattr(memory, name) == value for name, value in fields.items()):
                    continue
                changed += 1
                if not dry_run:
                    Memory.objects.filter(pk=memory.pk).update(**fields)
        return changed


def _read(memory_id: int) -> bool | llm.LLMError:
    """One memory read by the LLM: True when kept, or the LLM's error."""
    try:
        return about_llm.read_stored(memory_id)
    except llm.LLMError as error:
        return error


def _read_one(memory_id: int) -> bool | llm.LLMError:
    """``_read`` on a pool thread, whose own connection is closed after."""
    try:
        return _read(memory_id)
    finally:
        connection.close()


def _provider(stderr):
    try:
        return get_provider()
    except (EmbeddingError, OSError, RuntimeError) as error:
        stderr.write(f"No embedding model ({error}): aspects from the rules alone.")
        return None
