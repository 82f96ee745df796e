"""Word-level differences between two versions of a memory, for the chain view."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

# Words, runs of whitespace and single punctuation marks: joined back together
# they give the original text, so equal stretches keep their spacing.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")

Operation = Literal["equal", "delete", "insert"]


@dataclass(frozen=True)
class DiffPiece:
    operation: Operation
    text: str


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def word_diff(old: str, new: str) -> list[DiffPiece]:
    """The pieces that turn ``old`` into ``new``, in reading order.

    A replaced stretch becomes a deletion followed by an insertion; neighbouring
    pieces of the same kind are joined.
    """
    old_tokens, new_tokens = tokenize(old), tokenize(new)
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    pieces: list[DiffPiece] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _append(pieces, "equal", "".join(old_tokens[i1:i2]))
            continue
        if tag in ("delete", "replace"):
            _append(pieces, "delete", "".join(old_tokens[i1:i2]))
        if tag in ("insert", "replace"):
            _append(pieces, "insert", "".join(new_tokens[j1:j2]))
    return pieces


def _append(pieces: list[DiffPiece], operation: Operation, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1].operation == operation:
        pieces[-1] = DiffPiece(operation, pieces[-1].text + text)
    else:
        pieces.append(DiffPiece(operation, text))


def has_changes(pieces: list[DiffPiece]) -> bool:
    return any(piece.operation != "equal" for piece in pieces)
