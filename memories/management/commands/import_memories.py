"""`import_memories FILE.jsonl --owner USERNAME`: load memories from JSON Lines.

Good lines are kept, bad ones are listed with their line number and reason, and
the command fails (non-zero exit) if any line did. See docs/import-export.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import CommandError

from memories.io import PROGRESS_MIN_BYTES, import_memories
from memories.management.base import SchemaCommand, owner_by_username


class Command(SchemaCommand):
    help = "Import memories for an owner from a JSON Lines file ('-' reads stdin)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="A .jsonl file, one memory per line; '-' for stdin.")
        parser.add_argument("--owner", required=True, help="User name of the owner.")
        parser.add_argument(
            "--no-progress", action="store_true", help="No progress bar, even on large files."
        )

    def handle(self, *args, file: str, owner: str, no_progress: bool, **options) -> None:
        owner_user = owner_by_username(owner)

        if file == "-":
            result = import_memories(sys.stdin.buffer, owner_user, source_name="stdin")
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"No such file: {file}")
            size = path.stat().st_size
            show_progress = size >= PROGRESS_MIN_BYTES and not no_progress
            with path.open("rb") as lines:
                result = import_memories(
                    lines,
                    owner_user,
                    source_name=path.name,
                    progress_total=size if show_progress else None,
                    # The raw stream: tqdm redraws with \r, which OutputWrapper would break.
                    progress_file=self.stderr._out,
                )

        for error in result.errors:
            self.stderr.write(str(error))
        summary = f"Imported {result.imported} memories for {owner}"
        timing = f" in {result.write_seconds:.1f} s"
        if result.index_seconds is not None:
            timing += f", then built the vector index in {result.index_seconds:.1f} s"
        if result.failed:
            raise CommandError(f"{summary}; {result.failed} lines failed (listed above).")
        self.stdout.write(summary + timing + ".")
