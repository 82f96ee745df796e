"""`redact --owner USERNAME ID [--chain] --reason WHY [--vacuum-full | --erase-from-disk]`: erase a
memory's text.

The same model method as the API, the page and the admin (``Memory.redact``):
the row stays in its chain, marked redacted, and every copy of its text in the
database is erased; the tables touched are vacuumed right after. With
``--vacuum-full`` they are also rewritten whole, so that no byte of the old
text is left in their files (this locks each table while it runs; see
docs/privacy.md). With ``--erase-from-disk`` it runs an erase from disk here
and now (memories/disk_erase.py): every table that can hold a memory's text is
rewritten, and the WAL that held it is retired.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from memories import redaction
from memories.disk_erase import request_erase, run
from memories.management.base import SchemaCommand, owner_by_username
from memories.models import IllegalTransition, Memory, RedactionRefused
from memories.redaction import vacuum


class Command(SchemaCommand):
    help = "Erase what a memory (or, with --chain, every version of its chain) said, for good."

    def add_arguments(self, parser) -> None:
        parser.add_argument("memory_id", type=int, metavar="ID", help="The memory to redact.")
        parser.add_argument("--owner", required=True, help="User name of the memory's owner.")
        parser.add_argument(
            "--chain", action="store_true", help="Erase every version of its chain, not just ID."
        )
        parser.add_argument(
            "--reason", required=True, help="Why, for the record (must not quote the text)."
        )
        parser.add_argument(
            "--vacuum-full",
            action="store_true",
            help="Also rewrite the touched tables whole (VACUUM FULL): no old bytes stay in "
            "their files, but each table is locked while it is rewritten.",
        )
        parser.add_argument(
            "--erase-from-disk",
            action="store_true",
            help="Also run an erase from disk now: rewrite every table that can hold a "
            "memory's text and retire the WAL that held it (docs/privacy.md).",
        )

    def handle(
        self,
        *args,
        memory_id: int,
        owner: str,
        chain: bool,
        reason: str,
        vacuum_full: bool,
        erase_from_disk: bool = False,
        **options,
    ) -> None:
        owner_user = owner_by_username(owner)
        memory = Memory.objects.for_owner(owner_user).filter(pk=memory_id).first()
        if memory is None:
            raise CommandError(f"{owner} has no memory {memory_id}.")
        try:
            # Vacuumed once this commits (a background task, or right here without a worker).
            result = redaction.redact(memory, chain=chain, actor=None, via="command", reason=reason)
        except (IllegalTransition, RedactionRefused) as error:
            raise CommandError(error.message)
        if vacuum_full:
            vacuum(result.tables, full=True)
        done = "rewrote" if vacuum_full else "queued a vacuum of"
        self.stdout.write(
            f"Redacted memory {memory_id} of {owner} ({result.summary()}); "
            f"{done} {', '.join(result.tables)}."
        )
        if erase_from_disk:
            erase = request_erase(via="command", queue=False)
            run(erase.pk)
            erase.refresh_from_db()
            self.stdout.write(f"Erased from disk ({erase.state}): {erase.outcome}.")
