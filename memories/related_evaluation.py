"""How well ``memories.related.classify`` labels pairs, measured on a labelled set.

The set (``tests/memories/data/related-pairs.json``, format
``timothy-related-pairs/1``) holds pairs of an existing memory and a new fact,
labelled duplicate, update or unrelated, split into dev (thresholds are chosen
there) and test (reported, never tuned on). ``manage.py related_eval`` prints
precision and recall per class for each split, with embeddings and with
entities and words only, and can search the thresholds on dev.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

from django.conf import settings
from django.db import connection

from memories.related import (
    DEFAULT_THRESHOLDS,
    DUPLICATE,
    UPDATE,
    PairSignals,
    Thresholds,
    classify,
)

FORMAT = "timothy-related-pairs/1"
UNRELATED = "unrelated"
LABELS = (DUPLICATE, UPDATE, UNRELATED)
SPLITS = ("dev", "test")
DEFAULT_PAIRS = Path(settings.BASE_DIR) / "tests" / "memories" / "data" / "related-pairs.json"


class PairsError(ValueError):
    pass


@dataclass(frozen=True)
class Side:
    content: str
    entities: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    id: str
    label: str
    split: str
    existing: Side
    new: Side


def load_pairs(path: Path | str = DEFAULT_PAIRS) -> list[Pair]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PairsError(f"Cannot read {path}: {error}")
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise PairsError(f"{path} is not a {FORMAT} file.")
    pairs = []
    for index, item in enumerate(document.get("pairs") or []):
        try:
            pair = Pair(
                id=str(item["id"]),
                label=item["label"],
                split=item["split"],
                existing=Side(item["existing"]["content"], tuple(item["existing"]["entities"])),
                new=Side(item["new"]["content"], tuple(item["new"]["entities"])),
            )
        except (KeyError, TypeError) as error:
            raise PairsError(f"Pair {index} of {path} is malformed: {error}")
        if pair.label not in LABELS or pair.split not in SPLITS:
            raise PairsError(f"Pair {pair.id}: unknown label or split.")
        pairs.append(pair)
    if not pairs:
        raise PairsError(f"{path} holds no pairs.")
    return pairs


def lexemes_of(texts: Iterable[str]) -> dict[str, list[str]]:
    """English lexemes of each text, as PostgreSQL's ``tsv`` column has them."""
    unique = sorted(set(texts))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t, coalesce(tsvector_to_array(to_tsvector('english', t)), '{}') "
            "FROM unnest(%s::text[]) AS t",
            [unique],
        )
        return {text: list(lexemes) for text, lexemes in cursor.fetchall()}


def signals_of(
    pairs: Sequence[Pair], embed: Callable[[list[str]], list[list[float]]] | None
) -> list[PairSignals]:
    """The classifier's signals for every pair; ``embed`` None means words only."""
    texts = [side.content for pair in pairs for side in (pair.existing, pair.new)]
    lexemes = lexemes_of(texts)
    vectors: dict[str, list[float]] = {}
    if embed is not None:
        unique = sorted(set(texts))
        vectors = dict(zip(unique, embed(unique), strict=True))
    result = []
    for pair in pairs:
        cosine = None
        if embed is not None:
            cosine = _cosine(vectors[pair.existing.content], vectors[pair.new.content])
        result.append(
            PairSignals.of(
                old_text=pair.existing.content,
                new_text=pair.new.content,
                old_lexemes=lexemes[pair.existing.content],
                new_lexemes=lexemes[pair.new.content],
                old_entities=pair.existing.entities,
                new_entities=pair.new.entities,
                cosine=cosine,
            )
        )
    return result


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
    return dot / norm if norm else 0.0


def predict(signals: PairSignals, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str:
    relation, _ = classify(signals, thresholds)
    return relation or UNRELATED


@dataclass(frozen=True)
class ClassFigures:
    label: str
    support: int
    predicted: int
    correct: int

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.support if self.support else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class Figures:
    classes: dict[str, ClassFigures]
    # (truth, predicted) -> count
    confusion: dict[tuple[str, str], int]
    mistakes: list[tuple[str, str, str]]

    @property
    def accuracy(self) -> float:
        total = sum(self.confusion.values())
        right = sum(n for (truth, guess), n in self.confusion.items() if truth == guess)
        return right / total if total else 0.0

    @property
    def macro_f1(self) -> float:
        return sum(c.f1 for c in self.classes.values()) / len(self.classes)


def measure(
    pairs: Sequence[Pair],
    signals: Sequence[PairSignals],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> Figures:
    confusion = {(truth, guess): 0 for truth in LABELS for guess in LABELS}
    mistakes = []
    for pair, pair_signals in zip(pairs, signals, strict=True):
        guess = predict(pair_signals, thresholds)
        confusion[(pair.label, guess)] += 1
        if guess != pair.label:
            mistakes.append((pair.id, pair.label, guess))
    classes = {
        label: ClassFigures(
            label=label,
            support=sum(confusion[(label, guess)] for guess in LABELS),
            predicted=sum(confusion[(truth, label)] for truth in LABELS),
            correct=confusion[(label, label)],
        )
        for label in LABELS
    }
    return Figures(classes, confusion, mistakes)


# The grid the threshold search walks (each threshold's candidate values).
SEARCH_GRID = {
    "duplicate_min_cosine": [round(0.80 + 0.01 * i, 2) for i in range(18)],
    "update_min_cosine": [round(0.45 + 0.025 * i, 3) for i in range(15)],
    "update_min_cosine_changed": [round(0.30 + 0.05 * i, 2) for i in range(9)],
    "duplicate_min_lexical": [round(0.5 + 0.05 * i, 2) for i in range(10)],
    "update_min_lexical": [round(0.15 + 0.05 * i, 2) for i in range(10)],
    "update_min_lexical_with_entity": [round(0.1 + 0.05 * i, 2) for i in range(7)],
}
# The search's objective: macro F1, but only among thresholds whose duplicates
# are this precise (extraction drops what it calls a duplicate).
MIN_DUPLICATE_PRECISION = 0.85


def search_thresholds(
    pairs: Sequence[Pair], signals: Sequence[PairSignals], *, with_embeddings: bool
) -> tuple[Thresholds, Figures]:
    """The thresholds with the best macro F1 on these pairs whose duplicate
    precision is at least MIN_DUPLICATE_PRECISION (the best macro F1 if none is)."""
    names = (
        ["duplicate_min_cosine", "update_min_cosine", "update_min_cosine_changed"]
        if with_embeddings
        else ["duplicate_min_lexical", "update_min_lexical", "update_min_lexical_with_entity"]
    )
    best: tuple[tuple, Thresholds, Figures] | None = None
    for values in itertools.product(*(SEARCH_GRID[name] for name in names)):
        thresholds = replace(DEFAULT_THRESHOLDS, **dict(zip(names, values, strict=True)))
        figures = measure(pairs, signals, thresholds)
        precise = figures.classes[DUPLICATE].precision >= MIN_DUPLICATE_PRECISION
        rank = (precise, round(figures.macro_f1, 6), figures.classes[DUPLICATE].precision)
        if best is None or rank > best[0]:
            best = (rank, thresholds, figures)
    assert best is not None
    return best[1], best[2]


def thresholds_table(thresholds: Thresholds) -> list[tuple[str, float]]:
    return [(f.name.upper(), getattr(thresholds, f.name)) for f in fields(thresholds)]
