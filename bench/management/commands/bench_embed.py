"""`python manage.py bench_embed`: the local model's throughput, as a service process
runs it and as `reembed` runs it.

Realistic texts (recombined from the evaluation datasets, as `bench_search`
fills its owner) go through ``LocalEmbeddingProvider.embed`` in calls of
``REEMBED_BATCH_ROWS``, the way `reembed` sends them. Each run times both
ways of using the cores, alternating, so that a change of load falls on both:

- ``service``: one batch at a time, ``TIMOTHY_EMBEDDING_BATCH_SIZE`` texts,
  spread over ``--threads`` intra-op threads;
- ``bulk``: up to ``--threads`` small batches at once, one thread each
  (``LocalEmbeddingProvider(bulk=True)``, what `reembed` uses).

Then ``--queries`` questions of the dev sets, one at a time, as a search
embeds its query (one thread, ``TIMOTHY_EMBEDDING_THREADS``; the query cache
bypassed): the milliseconds of each, p50 and p95.

Nothing is written to a database.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from bench.management.commands.bench_search import PersonalCorpus, default_datasets
from bench.measure import describe_load, load_average
from memories.management.base import positive_int
from retrieval.batch_embed import REEMBED_BATCH_ROWS
from retrieval.embeddings import LocalEmbeddingProvider, default_local_model_path
from retrieval.names import EMBEDDING_PRECISIONS

MODES = ("service", "bulk")
# Texts embedded before the timing starts: the model loaded, its first passes done.
WARMUP_TEXTS = 64
WARMUP_QUERIES = 20


class Command(BaseCommand):
    help = "Measure the local embedding model's texts per second, one batch at a time and bulk."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--texts", type=positive_int, default=12_288, help="texts timed per mode and run"
        )
        parser.add_argument("--runs", type=positive_int, default=3, help="runs of each mode")
        parser.add_argument(
            "--queries",
            type=positive_int,
            default=300,
            help="single questions timed one at a time (a search's query)",
        )
        parser.add_argument(
            "--threads",
            type=positive_int,
            default=os.cpu_count() or 1,
            help="cores the model uses (default: every core, as reembed)",
        )
        parser.add_argument(
            "--runtime",
            choices=("onnx", "torch"),
            default=None,
            help="default: TIMOTHY_EMBEDDING_RUNTIME (torch needs requirements-torch.txt; "
            "bulk changes nothing under it)",
        )
        parser.add_argument(
            "--precision",
            choices=EMBEDDING_PRECISIONS,
            default=None,
            help="onnx: the weights' precision (default: TIMOTHY_EMBEDDING_PRECISION)",
        )
        parser.add_argument("--dataset", action="append", help="timothy-eval/1 file (repeat)")
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, **options) -> None:
        datasets = [Path(path) for path in options["dataset"] or default_datasets()]
        if not datasets:
            raise CommandError("No dataset found; name one with --dataset FILE.json.")
        corpus = PersonalCorpus(datasets, options["seed"])
        texts = [corpus.memory()[0] for _ in range(options["texts"])]
        runtime = (options["runtime"] or settings.EMBEDDING_RUNTIME or "onnx").lower()
        precision = options["precision"] or settings.EMBEDDING_PRECISION
        providers = {
            mode: LocalEmbeddingProvider(
                Path(settings.EMBEDDING_MODEL or default_local_model_path()),
                batch_size=settings.EMBEDDING_BATCH_SIZE,
                runtime=runtime,
                threads=options["threads"],
                export_dir=Path(settings.DATA_DIR) / "models",
                bulk=mode == "bulk",
                precision=precision,
            )
            for mode in MODES
        }
        for provider in providers.values():
            provider.embed(texts[:WARMUP_TEXTS])
        self.stdout.write(
            f"{len(texts):,} texts (mean {statistics.mean(map(len, texts)):.0f} characters) "
            f"in calls of {REEMBED_BATCH_ROWS}, {runtime} {providers['bulk'].precision}, "
            f"{options['threads']} thread(s); "
            f"machine: load average {describe_load(load_average())} at the start"
        )
        rates: dict[str, list[float]] = {mode: [] for mode in MODES}
        for run in range(1, options["runs"] + 1):
            for mode in MODES:
                started = time.perf_counter()
                for start in range(0, len(texts), REEMBED_BATCH_ROWS):
                    providers[mode].embed(texts[start : start + REEMBED_BATCH_ROWS])
                rates[mode].append(len(texts) / (time.perf_counter() - started))
            self.stdout.write(
                f"run {run}: "
                + ", ".join(f"{mode} {rates[mode][-1]:.1f} texts/s" for mode in MODES)
                + f" (load {load_average():.2f})"
            )
        self.stdout.write(f"{'mode':<10} {'batch':>5} {'median':>8}  texts/s over each run")
        for mode in MODES:
            model = providers[mode]._model_or_load()
            runs = " ".join(f"{rate:.1f}" for rate in rates[mode])
            self.stdout.write(
                f"{mode:<10} {model.batch_size:>5} {statistics.median(rates[mode]):>8.1f}  {runs}"
            )
        self._time_queries(corpus, runtime, precision, options["queries"])
        self.stdout.write(f"machine: load average {describe_load(load_average())} at the end")

    def _time_queries(self, corpus, runtime: str, precision: str, count: int) -> None:
        provider = LocalEmbeddingProvider(
            Path(settings.EMBEDDING_MODEL or default_local_model_path()),
            batch_size=settings.EMBEDDING_BATCH_SIZE,
            runtime=runtime,
            threads=settings.EMBEDDING_THREADS,
            export_dir=Path(settings.DATA_DIR) / "models",
            precision=precision,
        )
        queries = [corpus.query() for _ in range(count + WARMUP_QUERIES)]
        for query in queries[:WARMUP_QUERIES]:
            provider.embed([query])
        took = []
        for query in queries[WARMUP_QUERIES:]:
            started = time.perf_counter()
            provider.embed([query])
            took.append((time.perf_counter() - started) * 1000)
        p95 = statistics.quantiles(took, n=20)[-1] if len(took) > 1 else took[0]
        self.stdout.write(
            f"one query at a time ({count} questions, {settings.EMBEDDING_THREADS} thread(s)): "
            f"p50 {statistics.median(took):.2f} ms, p95 {p95:.2f} ms"
        )
