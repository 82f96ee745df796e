"""Measure retrieval quality on a labelled dataset in a throw-away database."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.constants import LEGS, PIPELINES, PROFILES
from retrieval.evaluation import DEFAULT_KS, DatasetError, load_dataset, run_evaluation
from retrieval.evaluation.report import render_table, write_json


def comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class Command(BaseCommand):
    help = (
        "Load a timothy-eval/1 dataset into a scratch database, run every query through "
        "recall as of its conversation's time, and report R@k, nDCG@k, MRR (overall and "
        "per category), tokens per block and latency."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="Path to a timothy-eval/1 JSON file.")
        parser.add_argument(
            "--pipeline",
            choices=[*PIPELINES, "all"],
            default=None,
            help="Pipeline to measure; 'all' puts them side by side "
            "(default: TIMOTHY_DEFAULT_PIPELINE).",
        )
        parser.add_argument(
            "--legs",
            default=None,
            help="Comma-separated fusion legs to ablate (e.g. vector,text,entity): runs each "
            "leg alone, every combination, and all of them together.",
        )
        parser.add_argument(
            "--k",
            default=",".join(str(k) for k in DEFAULT_KS),
            help="Comma-separated cut-offs for R@k and nDCG@k (default: %(default)s).",
        )
        parser.add_argument(
            "--budget",
            type=int,
            default=None,
            help="Token budget of each recall (default: TIMOTHY_DEFAULT_TOKEN_BUDGET).",
        )
        parser.add_argument(
            "--profile",
            default=None,
            help="Comma-separated fusion profiles to measure side by side, or 'all' "
            f"({', '.join(PROFILES)}; default: TIMOTHY_RETRIEVAL_PROFILE).",
        )
        parser.add_argument(
            "--entities",
            choices=["dataset", "auto", "none"],
            default="dataset",
            help="Memories' entities: the dataset's (default), none, or found by the store "
            "itself as for a memory written without any.",
        )
        parser.add_argument(
            "--json", dest="json_path", default=None, help="Write every figure here."
        )

    def handle(self, *args, **options) -> None:
        pipeline = options["pipeline"] or settings.DEFAULT_PIPELINE
        if pipeline not in (*PIPELINES, "all"):
            raise CommandError(f"Unknown pipeline {pipeline!r}.")
        legs = self.parse_legs(options["legs"], pipeline)
        profiles = self.parse_profiles(options["profile"])
        ks = self.parse_ks(options["k"])
        budget = (
            options["budget"] if options["budget"] is not None else settings.DEFAULT_TOKEN_BUDGET
        )
        if not 0 < budget <= settings.MAX_TOKEN_BUDGET:
            raise CommandError(f"--budget must be between 1 and {settings.MAX_TOKEN_BUDGET}.")
        try:
            dataset = load_dataset(options["dataset"])
        except DatasetError as error:
            raise CommandError(str(error))

        with terminate_as_interrupt():
            report = run_evaluation(
                dataset,
                pipeline=pipeline,
                legs=legs,
                ks=ks,
                token_budget=budget,
                dataset_path=options["dataset"],
                progress=self.stderr._out,
                profiles=profiles,
                entities=options["entities"],
            )

        self.stdout.write(render_table(report))
        if options["json_path"]:
            write_json(report, options["json_path"])
            self.stdout.write(f"\nWrote every figure to {options['json_path']}.")

    @staticmethod
    def parse_legs(value: str | None, pipeline: str) -> list[str] | None:
        if value is None:
            return None
        legs = comma_list(value)
        unknown = [leg for leg in legs if leg not in LEGS]
        if not legs or unknown:
            raise CommandError(f"--legs takes a comma-separated subset of {', '.join(LEGS)}.")
        if pipeline == "freshness":
            raise CommandError("--legs ablates the fusion pipeline; use --pipeline fusion or all.")
        return list(dict.fromkeys(legs))

    @staticmethod
    def parse_profiles(value: str | None) -> list[str] | None:
        if value is None:
            return None
        if value.strip() == "all":
            return list(PROFILES)
        profiles = comma_list(value)
        unknown = [name for name in profiles if name not in PROFILES]
        if not profiles or unknown:
            raise CommandError(
                f"--profile takes 'all' or a comma-separated subset of {', '.join(PROFILES)}."
            )
        return list(dict.fromkeys(profiles))

    @staticmethod
    def parse_ks(value: str) -> list[int]:
        try:
            ks = sorted({int(item) for item in comma_list(value)})
        except ValueError:
            ks = []
        if not ks or ks[0] < 1:
            raise CommandError("--k takes comma-separated positive integers, e.g. 1,5,10,25.")
        return ks


@contextmanager
def terminate_as_interrupt():
    """Let SIGTERM unwind like Ctrl-C, so the scratch database is dropped either way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
