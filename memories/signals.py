"""Signals other parts of the service listen to, and the hooks through which
the layers above the store do their part of a write.

``memory_written`` fires after the transaction that wrote a new memory row
commits; the embedding task listens to it, so a write never waits on a model.

The store knows nothing of retrieval; retrieval hands it two functions when
it loads (``RetrievalConfig.ready``):

- ``find_entities(owner_id, text)``: the entities of a memory written without
  any (retrieval/entities.py ``entities_for``);
- ``forget_redacted_names(owner_id, keys, was_active)``: the index forgets
  the names a redaction took out; returns (dictionary keys dropped, tables
  touched, which the redaction vacuums).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.dispatch import Signal

memory_written = Signal()  # kwargs: memory_id


def _no_entities(owner_id: int, text: str) -> list[str]:
    return []


def _nothing_to_forget(
    owner_id: int, keys: Iterable[str], was_active: bool
) -> tuple[int, list[str]]:
    return 0, []


find_entities: Callable[[int, str], list[str]] = _no_entities
forget_redacted_names: Callable[[int, Iterable[str], bool], tuple[int, list[str]]] = (
    _nothing_to_forget
)


def set_index_hooks(
    *,
    entities: Callable[[int, str], list[str]],
    forget: Callable[[int, Iterable[str], bool], tuple[int, list[str]]],
) -> None:
    """Called once by retrieval when it loads."""
    global find_entities, forget_redacted_names
    find_entities, forget_redacted_names = entities, forget
