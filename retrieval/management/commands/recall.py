"""Recall an owner's memories for a query and print the block (or the JSON)."""

from __future__ import annotations

import json
from datetime import datetime

from django.core.management.base import CommandError

from memories.management.base import SchemaCommand, owner_by_username
from retrieval.constants import PIPELINES, PROFILES
from retrieval.embeddings import get_provider
from retrieval.recall import recall
from retrieval.results import RecallFailed


def load_embedding_model() -> None:
    """Load a local model before recall starts: loading takes seconds, longer than
    the vector leg may take, so a one-shot command would otherwise lose that leg."""
    try:
        warm_up = getattr(get_provider(), "warm_up", None)
    except Exception:
        return  # recall reports an unusable provider in the vector leg
    if warm_up is not None:
        warm_up()


class Command(SchemaCommand):
    help = "Recall an owner's memories for QUERY and print the fenced block (or --json)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("query", nargs="+", help="the query text")
        parser.add_argument("--owner", required=True, help="the owner's username")
        parser.add_argument("--budget", type=int, default=None, help="token budget")
        parser.add_argument("--pipeline", choices=PIPELINES, default=None)
        parser.add_argument(
            "--profile", choices=list(PROFILES), default=None, help="fusion profile"
        )
        parser.add_argument("--as-of", default=None, help="ISO-8601 moment to replay the store at")
        parser.add_argument("--type", action="append", dest="types", help="memory type (repeat)")
        parser.add_argument("--json", action="store_true", help="print the search API's JSON")
        parser.add_argument("--explain", action="store_true", help="include what was cut and why")
        parser.add_argument("--dry-run", action="store_true", help="stamp nothing")

    def handle(self, *args, **options) -> None:
        owner = owner_by_username(options["owner"])
        as_of = None
        if options["as_of"]:
            try:
                as_of = datetime.fromisoformat(options["as_of"])
            except ValueError:
                raise CommandError(f"--as-of is not an ISO-8601 time: {options['as_of']!r}.")
        load_embedding_model()
        try:
            result = recall(
                owner,
                " ".join(options["query"]),
                pipeline=options["pipeline"],
                token_budget=options["budget"],
                types=options["types"],
                as_of=as_of,
                explain=options["explain"],
                dry_run=options["dry_run"],
                profile=options["profile"],
            )
        except ValueError as error:
            raise CommandError(str(error))
        except RecallFailed as failure:
            raise CommandError(f"Recall failed: {failure}")
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        elif result.block:
            self.stdout.write(result.block)
        else:
            self.stderr.write("No memories matched.")
