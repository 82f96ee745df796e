"""`python manage.py find_entities`: entities for memories written without any."""

from __future__ import annotations

from tqdm import tqdm

from memories.management.base import SchemaCommand, owner_by_username
from memories.models import Memory
from retrieval.entities import fill_missing_entities


class Command(SchemaCommand):
    help = (
        "Find entities for every memory that has none (written before the store found them "
        "by itself): names the owner's memories already carry, and proper nouns."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--owner", help="Only this owner's memories (username).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be filled; write nothing."
        )

    def handle(self, *args, owner: str | None = None, dry_run: bool = False, **options) -> None:
        owner_id = owner_by_username(owner).pk if owner else None
        missing = Memory.objects.filter(entity_refs=[])
        if owner_id is not None:
            missing = missing.filter(owner_id=owner_id)
        # disable=None: no bar when the output is not a terminal.
        with tqdm(
            total=missing.count(), unit=" memories", file=self.stderr._out, disable=None
        ) as bar:
            looked_at, filled = fill_missing_entities(
                owner_id, dry_run=dry_run, on_batch=lambda done: bar.update(done - bar.n)
            )
        verb = "Would give" if dry_run else "Gave"
        self.stdout.write(
            f"{verb} {filled} of {looked_at} memories without entities the entities "
            "their text names."
        )
