"""Packing scored memories into the fenced block under a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from retrieval.render import BLOCK_CLOSE, BLOCK_OPEN, render_block, render_item
from retrieval.results import ScoredMemory
from retrieval.tokens import count_tokens

OVER_BUDGET = "over_budget"

Item = TypeVar("Item")


@dataclass
class PackResult:
    # Packed memories in score order, best first.
    packed: list[ScoredMemory] = field(default_factory=list)
    # The fenced block in serial-position order; '' when nothing was packed.
    block: str = ""
    block_tokens: int = 0
    # Candidates left out for lack of room, in score order.
    over_budget: list[ScoredMemory] = field(default_factory=list)


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
    return render_block((item.memory.type, item.memory.content) for item in ordered)


def pack(candidates: Sequence[ScoredMemory], budget: int) -> PackResult:
    """Fill the block with the best candidates that fit in ``budget`` tokens.

    ``candidates`` come best first. Each is costed as its rendered line; the
    fence is reserved first; an item that does not fit is skipped and later,
    smaller ones may still fit. The promise is on the finished block:
    ``count_tokens(block) <= budget``.
    """
    remaining = budget - count_tokens(BLOCK_OPEN + BLOCK_CLOSE)
    packed: list[ScoredMemory] = []
    for candidate in candidates:
        candidate.tokens = count_tokens(
            render_item(candidate.memory.type, candidate.memory.content)
        )
        candidate.position = None
        if candidate.tokens <= remaining:
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
    over_budget = [item for item in candidates if id(item) not in packed_ids]
    return PackResult(
        packed=packed, block=block, block_tokens=block_tokens, over_budget=over_budget
    )
