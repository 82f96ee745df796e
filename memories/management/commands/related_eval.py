"""Precision and recall of the related-memory classifier on the labelled pairs."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.related_evaluation import (
    DEFAULT_PAIRS,
    LABELS,
    SPLITS,
    Figures,
    PairsError,
    load_pairs,
    measure,
    search_thresholds,
    signals_of,
    thresholds_table,
)
from retrieval.embeddings import EmbeddingError, get_provider


class Command(BaseCommand):
    help = (
        "Classify every labelled pair (duplicate / update / unrelated) with the configured "
        "embedding provider and with entities and words only; print precision, recall and F1 "
        "per class for the dev and test splits. --search picks thresholds on dev."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "pairs", nargs="?", default=str(DEFAULT_PAIRS), help="A timothy-related-pairs/1 file."
        )
        parser.add_argument(
            "--search",
            action="store_true",
            help="Also search the thresholds on the dev split and report them on both splits.",
        )
        parser.add_argument(
            "--mistakes", action="store_true", help="List the pairs each mode gets wrong."
        )

    def handle(self, *args, **options) -> None:
        try:
            pairs = load_pairs(options["pairs"])
        except PairsError as error:
            raise CommandError(str(error))
        provider = get_provider()
        modes = [("entities and words only", None)]
        if provider is None:
            self.stdout.write(
                "No embedding provider (TIMOTHY_EMBEDDING_PROVIDER=none): measuring entities "
                "and words only. Set TIMOTHY_EMBEDDING_PROVIDER=local for the figures with "
                "embeddings."
            )
        else:
            modes.insert(0, (f"embeddings ({provider!r})", provider.embed))
        counts = {label: sum(1 for p in pairs if p.label == label) for label in LABELS}
        self.stdout.write(
            f"{len(pairs)} pairs: "
            + ", ".join(f"{n} {label}" for label, n in counts.items())
            + "; "
            + ", ".join(f"{sum(1 for p in pairs if p.split == s)} {s}" for s in SPLITS)
        )
        for name, embed in modes:
            started = time.monotonic()
            try:
                signals = signals_of(pairs, embed)
            except EmbeddingError as error:
                raise CommandError(f"Embedding failed: {error}")
            elapsed = time.monotonic() - started
            self.stdout.write(f"\n== {name} (signals in {elapsed:.1f} s)")
            self._report("current thresholds", pairs, signals, None, options["mistakes"])
            if options["search"]:
                dev = [i for i, p in enumerate(pairs) if p.split == "dev"]
                best, _ = search_thresholds(
                    [pairs[i] for i in dev],
                    [signals[i] for i in dev],
                    with_embeddings=embed is not None,
                )
                self.stdout.write("Best on dev: " + _thresholds_line(best, embed is not None))
                self._report("searched thresholds", pairs, signals, best, options["mistakes"])

    def _report(self, title, pairs, signals, thresholds, show_mistakes: bool) -> None:
        self.stdout.write(f"-- {title}")
        header = f"{'split':<6} {'class':<10} {'n':>4} {'prec':>6} {'recall':>6} {'F1':>6}"
        self.stdout.write(header)
        for split in (*SPLITS, "all"):
            chosen = [i for i, p in enumerate(pairs) if split == "all" or p.split == split]
            args = ([pairs[i] for i in chosen], [signals[i] for i in chosen])
            figures: Figures = measure(*args, thresholds) if thresholds else measure(*args)
            for label in LABELS:
                c = figures.classes[label]
                self.stdout.write(
                    f"{split:<6} {label:<10} {c.support:>4} {c.precision:>6.3f} "
                    f"{c.recall:>6.3f} {c.f1:>6.3f}"
                )
            self.stdout.write(
                f"{split:<6} {'accuracy':<10} {len(chosen):>4} {figures.accuracy:>6.3f}   "
                f"macro F1 {figures.macro_f1:.3f}"
            )
            if show_mistakes and split == "all":
                for pair_id, truth, guess in figures.mistakes:
                    self.stdout.write(f"   {pair_id}: {truth} taken for {guess}")


def _thresholds_line(thresholds, with_embeddings: bool) -> str:
    wanted = "COSINE" if with_embeddings else "LEXICAL"
    return ", ".join(
        f"{name} = {value:g}" for name, value in thresholds_table(thresholds) if wanted in name
    )
