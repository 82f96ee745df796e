"""Packing scored memories into the fenced block under a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from retrieval.render import BLOCK_CLOSE, BLOCK_OPEN, render_block, render_item
from retrieval.results import ScoredMemory
from retrieval.tokens import count_tokens

OVER_BUDGET = "over_budget"
PAST_FALLOFF = "past_falloff"
ELLIPSIS = "…"

Item = TypeVar("Item")


@dataclass
class PackResult:
    # Packed memories in score order, best first.
    packed: list[ScoredMemory] = field(default_factory=list)
    # The fenced block in serial-position order; '' when nothing was packed.
    block: str = ""
    block_tokens: int = 0
    # Candidates left out, in score order: past where the scores fall off,
    # or for lack of room (each one's cut_reason says which).
    left_out: list[ScoredMemory] = field(default_factory=list)


def serial_position_order(items: Sequence[Item]) -> list[Item]:
    """Best first, then 3rd, 4th, ..., and the 2nd last.

    Models attend most to the start and the end of a context (the serial-position
    effect), so the two strongest memories take those places.
    """
    if len(items) < 3:
        return list(items)
    return [items[0], *items[2:], items[1]]


def _block_of(packed: Sequence[ScoredMemory]) -> str:
    ordered = serial_position_order(packed)
    return render_block((item.memory.type, item.shown_content) for item in ordered)


def shorten(memory_type: str, content: str, max_tokens: int) -> str | None:
    """The longest start of ``content`` (cut at a word, ending in an ellipsis)
    whose rendered line costs at most ``max_tokens``; None if not even a word fits."""
    low, high, best = 1, len(content) - 1, None
    while low <= high:
        middle = (low + high) // 2
        cut = content[:middle]
        # End on a word boundary when there is one in the second half.
        space = cut.rfind(" ")
        if space > middle // 2:
            cut = cut[:space]
        candidate = cut.rstrip() + ELLIPSIS
        if count_tokens(render_item(memory_type, candidate)) <= max_tokens:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best


def falls_off(score: float, best: float, falloff: float) -> bool:
    """Whether ``score`` lies where the scores have fallen off: under
    ``falloff`` times the ``best`` one (never, with ``falloff`` 0 or no best)."""
    return falloff > 0 and best > 0 and score < falloff * best


def pack(
    candidates: Sequence[ScoredMemory],
    budget: int,
    *,
    max_item_share: float | None = None,
    falloff: float = 0.0,
    max_memories: int | None = None,
) -> PackResult:
    """Fill the block with the best candidates that fit in ``budget`` tokens.

    ``candidates`` come best first. The block ends where the scores fall off:
    a candidate scoring under ``falloff`` times the best one's score stays
    out (``past_falloff``), and so does every one after the block holds
    ``max_memories``, for a list whose scores never fall off. A query with one
    clear answer gets that answer alone; one whose leaders score alike (a
    question that needs two or three memories) gets them all.

    Each candidate is costed as its rendered line; the fence is reserved
    first; an item that does not fit is skipped and later, smaller ones may
    still fit. With ``max_item_share`` no memory's line may take more than
    that share of the budget: a longer memory is shown cut short, with an
    ellipsis, rather than crowding out the others. The budget is the ceiling
    whatever the scores: ``count_tokens(block) <= budget``.
    """
    remaining = budget - count_tokens(BLOCK_OPEN + BLOCK_CLOSE)
    item_allowance = int(budget * max_item_share) if max_item_share else None
    best = candidates[0].score if candidates else 0.0
    packed: list[ScoredMemory] = []
    for candidate in candidates:
        candidate.shortened = None
        candidate.position = None
        candidate.tokens = count_tokens(
            render_item(candidate.memory.type, candidate.memory.content)
        )
        if item_allowance is not None and candidate.tokens > item_allowance:
            shortened = shorten(candidate.memory.type, candidate.memory.content, item_allowance)
            if shortened is not None:
                candidate.shortened = shortened
                candidate.tokens = count_tokens(render_item(candidate.memory.type, shortened))
        if falls_off(candidate.score, best, falloff) or (
            max_memories is not None and len(packed) >= max_memories
        ):
            candidate.cut_reason = PAST_FALLOFF
        elif candidate.tokens <= remaining:
            candidate.cut_reason = None
            packed.append(candidate)
            remaining -= candidate.tokens
        else:
            candidate.cut_reason = OVER_BUDGET

    block = _block_of(packed)
    block_tokens = count_tokens(block)
    # Token merges across line boundaries can make the block cost more than the sum of
    # its lines; give up the weakest packed memories until the block itself fits.
    while packed and block_tokens > budget:
        packed.pop().cut_reason = OVER_BUDGET
        block = _block_of(packed)
        block_tokens = count_tokens(block)

    for position, item in enumerate(serial_position_order(packed)):
        item.position = position
    packed_ids = {id(item) for item in packed}
    left_out = [item for item in candidates if id(item) not in packed_ids]
    return PackResult(packed=packed, block=block, block_tokens=block_tokens, left_out=left_out)
