"""How well ``memories.related.classify`` labels pairs, measured on a labelled set.

A set (``tests/memories/data/about-pairs.json``, format
``timothy-related-pairs/2``) holds pairs of an existing memory and a new fact,
labelled duplicate, update or unrelated, each with the persona it was written
for. ``manage.py related_eval`` prints precision and recall per class for each
split, with embeddings and with entities and words only. The learned
classifier (``memories.related.LearnedClassifier``) is fitted on every pair of
that set (``fit_classifier``); ``cross_persona`` measures it honestly, each
persona judged by a classifier fitted on the others, and
``about-pairs-holdout.json`` (three more personas, never fitted on) tests it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from memories.about import (
    About,
    KnownSubjects,
    checked_about,
    derive_about,
    refined,
    same_subject,
    with_known_subject,
)
from memories.related import (
    CLASSES,
    DEFAULT_THRESHOLDS,
    DUPLICATE,
    PAIR_FEATURES,
    STORED,
    UNRELATED,
    UPDATE,
    LearnedClassifier,
    PairSignals,
    Thresholds,
    classify,
    pair_features,
)

FORMATS = ("timothy-related-pairs/1", "timothy-related-pairs/2")
LABELS = (DUPLICATE, UPDATE, UNRELATED)
SPLITS = ("dev", "test", "holdout")
DATA_DIR = Path(settings.BASE_DIR) / "tests" / "memories" / "data"
# Pairs labelled by what each side is about, over invented personas (format 2).
ABOUT_PAIRS = DATA_DIR / "about-pairs.json"
# Three more personas by another writer: first read once as a test, then fitted on.
HOLDOUT_PAIRS = DATA_DIR / "about-pairs-holdout.json"
DEFAULT_PAIRS = (ABOUT_PAIRS, HOLDOUT_PAIRS)
# The first set (format 1): no types, dates or abouts.
FIRST_PAIRS = DATA_DIR / "related-pairs.json"


class PairsError(ValueError):
    pass


@dataclass(frozen=True)
class Side:
    content: str
    entities: tuple[str, ...]
    type: str = "semantic"
    created_at: datetime | None = None
    # The labelled about (format 2), to measure ``derive_about`` against.
    about: About | None = None

    def derived_about(self) -> About:
        return derive_about(
            self.content, self.type, entities=self.entities, written=self.created_at
        )


@dataclass(frozen=True)
class Pair:
    id: str
    label: str
    split: str
    existing: Side
    new: Side
    # What kind of pair it is (format 2): "other-person", "paraphrase", ...
    kind: str = ""
    persona: str = ""


def load_pairs(path: Path | str = ABOUT_PAIRS) -> list[Pair]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PairsError(f"Cannot read {path}: {error}")
    if not isinstance(document, dict) or document.get("format") not in FORMATS:
        raise PairsError(f"{path} is not a timothy-related-pairs file (format 1 or 2).")
    pairs = []
    for index, item in enumerate(document.get("pairs") or []):
        try:
            pair = Pair(
                id=str(item["id"]),
                label=item["label"],
                split=item["split"],
                existing=_side(item["existing"]),
                new=_side(item["new"]),
                kind=str(item.get("kind") or ""),
                persona=str(item.get("persona") or ""),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise PairsError(f"Pair {index} of {path} is malformed: {error}")
        if pair.label not in LABELS or pair.split not in SPLITS:
            raise PairsError(f"Pair {pair.id}: unknown label or split.")
        pairs.append(pair)
    if not pairs:
        raise PairsError(f"{path} holds no pairs.")
    return pairs


def load_default_pairs() -> list[Pair]:
    """Every pair of ``DEFAULT_PAIRS``, as one set."""
    return [pair for path in DEFAULT_PAIRS for pair in load_pairs(path)]


def _side(item: dict) -> Side:
    created = item.get("created_at")
    about = item.get("about")
    return Side(
        content=item["content"],
        entities=tuple(item["entities"]),
        type=item.get("type") or "semantic",
        created_at=datetime.fromisoformat(created).replace(tzinfo=UTC) if created else None,
        about=checked_about(
            {key: about.get(key, "") for key in ("subject", "kind", "aspect", "occasion")},
            set_by="import",
        )
        if about
        else None,
    )


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
    pairs: Sequence[Pair],
    embed: Callable[[list[str]], list[list[float]]] | None,
    *,
    by_about: bool = True,
) -> list[PairSignals]:
    """The classifier's signals for every pair; ``embed`` None means words only.

    ``by_about`` derives what each side is about, as the service does when a
    memory is written; without it the pair is judged as before there was an
    about (by closeness and words).
    """
    texts = [side.content for pair in pairs for side in (pair.existing, pair.new)]
    lexemes = lexemes_of(texts)
    vectors: dict[str, list[float]] = {}
    if embed is not None:
        unique = sorted(set(texts))
        vectors = dict(zip(unique, embed(unique), strict=True))
    abouts = _abouts(pairs, vectors, embed) if by_about else {}
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
                old_about=abouts.get((pair.persona, pair.existing.content, pair.existing.type)),
                new_about=abouts.get((pair.persona, pair.new.content, pair.new.type)),
                old_type=pair.existing.type,
                new_type=pair.new.type,
            )
        )
    return result


def _abouts(
    pairs: Sequence[Pair], vectors: dict[str, list[float]], embed
) -> dict[tuple[str, str, str], About]:
    """What each side of each pair is about, keyed by (persona, text, type), as
    the service stores it: each persona's store holds its pairs' existing
    memories, and whom they name completes a bare name or relation
    (``memories.about.with_known_subject``)."""
    abouts = {
        (pair.persona, side.content, side.type): _about(side, vectors, embed)
        for pair in pairs
        for side in (pair.existing, pair.new)
    }
    known: dict[str, KnownSubjects] = {}
    for pair in pairs:
        about = abouts[pair.persona, pair.existing.content, pair.existing.type]
        known.setdefault(pair.persona, KnownSubjects()).learn_memory(about, pair.existing.content)
    return {key: with_known_subject(about, known[key[0]]) for key, about in abouts.items()}


class _Embedder:
    def __init__(self, embed) -> None:
        self.embed = embed

    def __repr__(self) -> str:
        return f"evaluation embedder {id(self.embed)}"


def _about(side: Side, vectors: dict[str, list[float]], embed) -> About:
    """What the side is about, as the service derives it when the memory is
    written and then embedded (the aspect by meaning where no rule found one)."""
    about = side.derived_about()
    if embed is None:
        return about
    return refined(about, side.type, vectors[side.content], _Embedder(embed))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
    return dot / norm if norm else 0.0


def predict(
    signals: PairSignals,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    learned: LearnedClassifier | None | object = STORED,
) -> str:
    """duplicate, update or unrelated ("see also" is not related: it offers no action)."""
    relation, _ = classify(signals, thresholds, learned=learned)
    return relation if relation in (DUPLICATE, UPDATE) else UNRELATED


# --- the learned classifier ------------------------------------------------------------

# L2 penalty, gradient steps and step size of the fit: enough steps to converge
# from zero weights on a few hundred pairs; the penalty keeps any one signal
# from deciding alone (chosen by the cross-persona figures, 1 to 20 alike).
FIT_L2 = 5.0
FIT_STEPS = 3000
FIT_STEP_SIZE = 0.1


def fit_classifier(pairs: Sequence[Pair], signals: Sequence[PairSignals]) -> LearnedClassifier:
    """A multinomial logistic regression of the labels on ``PAIR_FEATURES``,
    by gradient descent from zero (deterministic: the same pairs give the same
    weights)."""
    import numpy as np

    features = np.asarray([pair_features(s) for s in signals], dtype=float)
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale == 0] = 1.0
    standard = np.hstack([(features - mean) / scale, np.ones((len(features), 1))])
    targets = np.eye(len(CLASSES))[[CLASSES.index(pair.label) for pair in pairs]]
    weights = np.zeros((standard.shape[1], len(CLASSES)))
    penalty = np.full((standard.shape[1], 1), FIT_L2)
    penalty[-1] = 0.0  # the bias is not penalised
    for _ in range(FIT_STEPS):
        logits = standard @ weights
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        gradient = (standard.T @ (probabilities - targets) + penalty * weights) / len(pairs)
        weights -= FIT_STEP_SIZE * gradient
    return LearnedClassifier(
        features=tuple(name for name, _ in PAIR_FEATURES),
        mean=tuple(round(float(v), 6) for v in mean),
        scale=tuple(round(float(v), 6) for v in scale),
        weights=tuple(tuple(round(float(v), 6) for v in row) for row in weights),
    )


def cross_persona(pairs: Sequence[Pair], signals: Sequence[PairSignals]) -> list[str]:
    """Each pair's guess by a classifier fitted on the other personas' pairs
    only: how the classifier does on people it has never seen."""
    personas = sorted({pair.persona for pair in pairs})
    if len(personas) < 2:
        raise PairsError("Judging across personas needs pairs from two personas at least.")
    guesses = [""] * len(pairs)
    for persona in personas:
        others = [i for i, pair in enumerate(pairs) if pair.persona != persona]
        model = fit_classifier([pairs[i] for i in others], [signals[i] for i in others])
        for i, pair in enumerate(pairs):
            if pair.persona == persona:
                guesses[i] = predict(signals[i], learned=model)
    return guesses


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
    guesses: Sequence[str] | None = None,
) -> Figures:
    """Per-class figures of ``guesses`` (by default the service's own, ``predict``)."""
    if guesses is None:
        guesses = [predict(pair_signals, thresholds) for pair_signals in signals]
    confusion = {(truth, guess): 0 for truth in LABELS for guess in LABELS}
    mistakes = []
    for pair, guess in zip(pairs, guesses, strict=True):
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


# --- what the targets read ---------------------------------------------------


@dataclass(frozen=True)
class Judgements:
    """The figures an owner feels: are suggestions right, are near-misses left alone."""

    pairs: int
    # "Related at all" (duplicate or update, either way round).
    related_precision: float
    related_recall: float
    # Of the pairs labelled related, the share given exactly their relation.
    relation_right: float
    # Of the pairs labelled unrelated, the share offered as a duplicate or update.
    near_misses_flagged: float
    # kind -> (pairs, right)
    by_kind: dict[str, tuple[int, int]]


def judgements(
    pairs: Sequence[Pair],
    signals: Sequence[PairSignals],
    guesses: Sequence[str] | None = None,
) -> Judgements:
    if guesses is None:
        guesses = [predict(pair_signals) for pair_signals in signals]
    related = [pair.label != UNRELATED for pair in pairs]
    flagged = [guess != UNRELATED for guess in guesses]
    true_positive = sum(1 for r, f in zip(related, flagged, strict=True) if r and f)
    by_kind: dict[str, tuple[int, int]] = {}
    for pair, guess in zip(pairs, guesses, strict=True):
        total, right = by_kind.get(pair.kind or pair.label, (0, 0))
        by_kind[pair.kind or pair.label] = (total + 1, right + (guess == pair.label))
    unrelated = [f for r, f in zip(related, flagged, strict=True) if not r]
    related_pairs = [
        (pair, guess) for pair, guess in zip(pairs, guesses, strict=True) if pair.label != UNRELATED
    ]
    return Judgements(
        pairs=len(pairs),
        related_precision=true_positive / sum(flagged) if any(flagged) else 0.0,
        related_recall=true_positive / sum(related) if any(related) else 0.0,
        relation_right=(
            sum(1 for pair, guess in related_pairs if guess == pair.label) / len(related_pairs)
            if related_pairs
            else 0.0
        ),
        near_misses_flagged=sum(unrelated) / len(unrelated) if unrelated else 0.0,
        by_kind=dict(sorted(by_kind.items())),
    )


@dataclass(frozen=True)
class AboutAccuracy:
    memories: int
    subject: float
    kind: float
    aspect: float
    # Events only: the date part of the occasion.
    occasion: float
    events: int
    # (memory text, field, labelled, derived) for each miss
    misses: list[tuple[str, str, str, str]]


def about_accuracy(pairs: Sequence[Pair], embed=None) -> AboutAccuracy:
    """How often the derived about agrees with the labelled about of each memory
    (each distinct text once). The subject counts as right when it names the
    same subject (``same_subject``: "brother Tom" for "Tom"). With ``embed``
    (``texts -> vectors``) the about is the one the service stores: the rules',
    with the aspect by meaning where no rule found one, and the subject
    completed by whom the persona's other memories name."""
    sides = {}
    for pair in pairs:
        for side in (pair.existing, pair.new):
            if side.about is not None:
                sides[(pair.persona, side.content, side.type)] = side
    texts = sorted({side.content for pair in pairs for side in (pair.existing, pair.new)})
    vectors = dict(zip(texts, embed(texts), strict=True)) if embed and texts else {}
    abouts = _abouts(pairs, vectors, embed)
    counts = {"subject": 0, "kind": 0, "aspect": 0, "occasion": 0}
    events = 0
    misses = []
    for key, side in sides.items():
        labelled, derived = side.about, abouts[key]
        checks = {
            "subject": same_subject(labelled, derived)
            and labelled.kind == derived.kind
            or labelled.subject.casefold() == derived.subject.casefold(),
            "kind": labelled.kind == derived.kind,
            "aspect": _aspect_key(labelled.aspect) == _aspect_key(derived.aspect),
        }
        if side.type == "episodic" and labelled.occasion:
            events += 1
            label_date, derived_date = _date_part(labelled.occasion), _date_part(derived.occasion)
            checks["occasion"] = bool(derived_date) and (
                label_date.startswith(derived_date) or derived_date.startswith(label_date)
            )
        for name, right in checks.items():
            counts[name] += right
            if not right:
                misses.append((side.content, name, getattr(labelled, name), getattr(derived, name)))
    total = len(sides) or 1
    return AboutAccuracy(
        memories=len(sides),
        subject=counts["subject"] / total,
        kind=counts["kind"] / total,
        aspect=counts["aspect"] / total,
        occasion=counts["occasion"] / events if events else 0.0,
        events=events,
        misses=misses,
    )


def _aspect_key(aspect: str) -> str:
    return aspect.removeprefix("preference:")


def _date_part(occasion: str) -> str:
    return occasion.lstrip("~").split()[0] if occasion.strip("~ ") else ""
