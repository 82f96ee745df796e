"""Rebuild the retrieval index from the memories: one owner's part, or all of it.

The triggers keep the index right after every write; this is for the cases
they cannot see: a bulk load that paused them (``retrieval.index.pause()``)
and never resumed, rows changed with the triggers off, a ``check`` warning.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.checks import ERROR
from django.core.management.base import CommandError
from tqdm import tqdm

from memories.management.base import SchemaCommand
from retrieval import index


class Command(SchemaCommand):
    help = (
        "Recount the retrieval index (postings, entity dictionary, BM25 corpus sums) from "
        "the memories, switch paused triggers back on, build a missing postings key or "
        "vector index; then check it."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--owner", help="User name: rebuild only this owner's part (default: everyone's)."
        )
        parser.add_argument(
            "--check-only", action="store_true", help="Only check the index; change nothing."
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(
        self, *args, owner: str | None, check_only: bool, no_progress: bool, **options
    ) -> None:
        owner_id = self.owner_id(owner) if owner else None
        if not check_only:
            if owner_id is None:
                self.rebuild_all(no_progress)
            else:
                self.rebuild_owner(owner, owner_id, no_progress)
        self.report(index.check())

    def owner_id(self, username: str) -> int:
        User = get_user_model()
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username}).pk
        except User.DoesNotExist:
            raise CommandError(f"There is no user {username!r}.")

    def rebuild_all(self, no_progress: bool) -> None:
        paused = index.paused_triggers()
        if paused:
            self.stdout.write(f"Switching {len(paused)} paused trigger(s) back on.")
        steps = (
            len(index.REBUILD_FUNCTIONS)
            + (not index.posting_key_exists())
            + (index.vector_index_state() != "live")
        )
        with self.progress(steps, no_progress) as bar:
            seconds = index.resume(done=self.advance(bar))
            if not paused:  # resume() recounts only after a pause
                seconds.update(index.rebuild(done=self.advance(bar)))
        self.summarise("Rebuilt the retrieval index", seconds)

    def rebuild_owner(self, username: str, owner_id: int, no_progress: bool) -> None:
        if index.paused_triggers():
            raise CommandError(
                "The retrieval index's triggers are switched off (a bulk load paused them): "
                "rebuild everyone's part, without --owner, to switch them back on."
            )
        steps = len(index.REBUILD_FUNCTIONS) + (not index.posting_key_exists())
        with self.progress(steps, no_progress) as bar:
            seconds = index.rebuild(owner_id, done=self.advance(bar))
        self.summarise(f"Rebuilt {username}'s part of the retrieval index", seconds)

    def progress(self, steps: int, no_progress: bool) -> tqdm:
        # The raw stream: tqdm redraws with \r, which OutputWrapper would break.
        return tqdm(total=steps, unit="part", disable=no_progress, file=self.stderr._out)

    @staticmethod
    def advance(bar: tqdm):
        def done(part: str, seconds: float) -> None:
            bar.set_postfix_str(part)
            bar.update(1)

        return done

    def summarise(self, what: str, seconds: dict[str, float]) -> None:
        parts = ", ".join(f"{part} {took:.1f} s" for part, took in seconds.items())
        self.stdout.write(f"{what}: {parts}.")

    def report(self, problems) -> None:
        for problem in problems:
            hint = f" {problem.hint}" if problem.hint else ""
            self.stderr.write(f"{problem.id}: {problem.msg}{hint}")
        errors = [problem for problem in problems if problem.level >= ERROR]
        if errors:
            raise CommandError(f"The retrieval index has {len(errors)} problem(s) (above).")
        if not problems:
            self.stdout.write("The retrieval index is complete and matches the memories.")
