"""`python manage.py consolidate`: merge near-duplicates, archive stale episodes, decay facts."""

from __future__ import annotations

from memories import consolidation
from memories.management.base import SchemaCommand, owner_by_username


class Command(SchemaCommand):
    help = "Consolidate memories: merge near-duplicates, archive stale events, decay stale facts."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--owner", help="Only this owner's memories (username).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Print the plan and write nothing."
        )

    def handle(self, *args, owner: str | None = None, dry_run: bool = False, **options) -> None:
        user = owner_by_username(owner) if owner else None
        plan, outcome = consolidation.consolidate(user, dry_run=dry_run)
        if dry_run or options["verbosity"] > 1:
            for line in plan.describe():
                self.stdout.write(line)
        if dry_run:
            self.stdout.write(
                f"Dry run: would merge {len(plan.merges)} groups, archive "
                f"{len(plan.archives)}, decay {len(plan.decays)}; nothing written."
            )
        else:
            self.stdout.write(f"Consolidated: {outcome.summary()}.")
