"""`export_memories --owner USERNAME [FILE]`: write an owner's memories as JSON Lines.

Writes to stdout when no FILE is given. `import_memories` reads the result back,
chains included. See docs/import-export.md.
"""

from __future__ import annotations

from pathlib import Path

from memories.io import export_lines
from memories.management.base import SchemaCommand, owner_by_username


class Command(SchemaCommand):
    help = "Export every memory of an owner as JSON Lines (to FILE, or stdout)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", nargs="?", help="Where to write; stdout if omitted.")
        parser.add_argument("--owner", required=True, help="User name of the owner.")

    def handle(self, *args, file: str | None, owner: str, **options) -> None:
        owner_user = owner_by_username(owner)

        count = 0
        if file is None:
            for line in export_lines(owner_user):
                self.stdout.write(line)
                count += 1
            # stdout carries the data; the summary goes to stderr.
            self.stderr.write(f"Exported {count} memories of {owner}.")
            return
        with Path(file).open("w", encoding="utf-8") as out:
            for line in export_lines(owner_user):
                out.write(line + "\n")
                count += 1
        self.stdout.write(f"Exported {count} memories of {owner} to {file}.")
