"""How well the service judges which memory a new fact repeats or updates, on labelled pairs."""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.related import CLASSIFIER_PATH, classifier_file, stored_classifier
from memories.related_evaluation import (
    DEFAULT_PAIRS,
    LABELS,
    SPLITS,
    Figures,
    Judgements,
    PairsError,
    about_accuracy,
    cross_persona,
    fit_classifier,
    judgements,
    load_pairs,
    measure,
    predict,
    signals_of,
)
from retrieval.embeddings import EmbeddingError, embedding_space, get_provider


class Command(BaseCommand):
    help = (
        "Classify every labelled pair (duplicate / update / unrelated) as the service does, by "
        "what each side is about, with the configured embedding provider and with entities and "
        "words only. Prints, per split: precision and recall of 'related at all', the share of "
        "related pairs given the right relation, the share of near-misses flagged, per class "
        "and per kind of pair; and how often the derived about matches the labelled one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "pairs",
            nargs="*",
            default=[str(path) for path in DEFAULT_PAIRS],
            help="timothy-related-pairs files (format 1 or 2), read as one set; default: the "
            "about pairs and their holdout (eight personas).",
        )
        parser.add_argument(
            "--split",
            choices=[*SPLITS, "all"],
            default="all",
            help="Report only this split (default: dev, test and all).",
        )
        parser.add_argument(
            "--closeness",
            action="store_true",
            help="Also judge the pairs by closeness and words alone, as before abouts existed.",
        )
        parser.add_argument(
            "--mistakes", action="store_true", help="List the pairs each mode gets wrong."
        )
        judge = parser.add_mutually_exclusive_group()
        judge.add_argument(
            "--cross-persona",
            action="store_true",
            help="Judge each persona's pairs with a classifier fitted on the other personas "
            "only (how it does on people it has never seen).",
        )
        judge.add_argument(
            "--rules",
            action="store_true",
            help="Judge by the rules alone, without the learned classifier.",
        )
        judge.add_argument(
            "--fit",
            action="store_true",
            help=f"Fit the classifier on every pair of the file and write {CLASSIFIER_PATH.name} "
            "(needs embeddings); then report as usual.",
        )

    def handle(self, *args, **options) -> None:
        self.pairs_paths = options["pairs"]
        try:
            pairs = [pair for path in options["pairs"] for pair in load_pairs(path)]
        except PairsError as error:
            raise CommandError(str(error))
        provider = get_provider()
        modes = [("entities and words only", None)]
        if provider is None and options["fit"]:
            raise CommandError(
                "Fitting the classifier needs embeddings: set TIMOTHY_EMBEDDING_PROVIDER=local."
            )
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
        splits = (*SPLITS, "all") if options["split"] == "all" else (options["split"],)
        for name, embed in modes:
            for by_about in (True, False) if options["closeness"] else (True,):
                started = time.monotonic()
                try:
                    signals = signals_of(pairs, embed, by_about=by_about)
                except EmbeddingError as error:
                    raise CommandError(f"Embedding failed: {error}")
                elapsed = time.monotonic() - started
                if options["fit"] and embed is not None and by_about:
                    self._fit(pairs, signals)
                judged, guesses = self._guesses(pairs, signals, by_about, options)
                self.stdout.write(f"\n== {name}, {judged} (signals in {elapsed:.1f} s)")
                for split in splits:
                    chosen = [i for i, p in enumerate(pairs) if split == "all" or p.split == split]
                    if not chosen:
                        continue
                    chosen_pairs = [pairs[i] for i in chosen]
                    chosen_signals = [signals[i] for i in chosen]
                    chosen_guesses = [guesses[i] for i in chosen]
                    self._judgements(
                        split, judgements(chosen_pairs, chosen_signals, chosen_guesses)
                    )
                    self._classes(
                        split,
                        measure(chosen_pairs, chosen_signals, guesses=chosen_guesses),
                        options,
                    )
        self._about(pairs, splits, provider.embed if provider is not None else None)

    def _guesses(self, pairs, signals, by_about: bool, options) -> tuple[str, list[str]]:
        if not by_about:
            return "by closeness and words", [predict(s) for s in signals]
        if options["rules"] or signals[0].cosine is None:
            return "by about, rules", [predict(s, learned=None) for s in signals]
        if options["cross_persona"]:
            try:
                guesses = cross_persona(pairs, signals)
            except PairsError as error:
                raise CommandError(str(error))
            return "by about, learned, each persona unseen", guesses
        if stored_classifier() is None:
            return "by about, rules (no classifier fitted)", [predict(s) for s in signals]
        return "by about, learned", [predict(s) for s in signals]

    def _fit(self, pairs, signals) -> None:
        started = time.monotonic()
        model = fit_classifier(pairs, signals)
        document = model.to_document(
            embeddings=embedding_space(),
            fitted_on=f"{len(pairs)} pairs of "
            + ", ".join(Path(path).name for path in self.pairs_paths)
            + ", "
            f"{len({p.persona for p in pairs})} personas",
        )
        CLASSIFIER_PATH.parent.mkdir(parents=True, exist_ok=True)
        CLASSIFIER_PATH.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        classifier_file.cache_clear()
        self.stdout.write(
            f"Fitted the classifier on {len(pairs)} pairs in {time.monotonic() - started:.1f} s:"
            f" wrote {CLASSIFIER_PATH}"
        )

    def _judgements(self, split: str, figures: Judgements) -> None:
        self.stdout.write(
            f"-- {split}: {figures.pairs} pairs · related at all P {figures.related_precision:.3f}"
            f" R {figures.related_recall:.3f} · relation right {figures.relation_right:.3f}"
            f" · near-misses flagged {figures.near_misses_flagged:.3f}"
        )
        if any(kind not in LABELS for kind in figures.by_kind):
            self.stdout.write(
                "   by kind: "
                + ", ".join(
                    f"{kind} {right}/{total}" for kind, (total, right) in figures.by_kind.items()
                )
            )

    def _classes(self, split: str, figures: Figures, options) -> None:
        for label in LABELS:
            c = figures.classes[label]
            self.stdout.write(
                f"   {label:<10} n {c.support:>4}  P {c.precision:.3f}  R {c.recall:.3f}"
                f"  F1 {c.f1:.3f}"
            )
        if options["mistakes"]:
            for pair_id, truth, guess in figures.mistakes:
                self.stdout.write(f"   {pair_id}: {truth} taken for {guess}")

    def _about(self, pairs, splits, embed) -> None:
        for split in splits:
            chosen = [p for p in pairs if split == "all" or p.split == split]
            by_rules = about_accuracy(chosen)
            if not by_rules.memories:
                continue
            stored = about_accuracy(chosen, embed) if embed is not None else by_rules
            by_meaning = (
                f" (the rules alone {by_rules.aspect:.3f}; the rest by meaning)"
                if embed is not None
                else " (the rules alone: no embeddings)"
            )
            self.stdout.write(
                f"\n== what each memory is about, {split}: {stored.memories} labelled memories:"
                f" subject {stored.subject:.3f}, kind {stored.kind:.3f},"
                f" aspect {stored.aspect:.3f}{by_meaning}; occasion of {stored.events} events"
                f" {stored.occasion:.3f}"
            )
