"""compose_system: the block after the stable prefix, the prefix byte for byte."""

from __future__ import annotations

from retrieval import render
from timothy_client import compose_system
from timothy_client.models import FENCE_CLOSE_TAG, FENCE_OPEN_TAG

PREFIX = "You are Timothy.\nBe brief. Ünïcödé stays as it is.  "
BLOCK_A = FENCE_OPEN_TAG + "\n- [semantic] Likes kites.\n" + FENCE_CLOSE_TAG
BLOCK_B = FENCE_OPEN_TAG + "\n- [preference] Drinks green tea.\n" + FENCE_CLOSE_TAG


def test_it_appends_the_block_after_a_blank_line():
    assert compose_system(PREFIX, BLOCK_A) == PREFIX + "\n\n" + BLOCK_A


def test_it_leaves_the_prefix_alone_without_a_block():
    assert compose_system(PREFIX, "") is PREFIX


def test_it_keeps_the_prefix_byte_identical_across_turns():
    turns = [compose_system(PREFIX, block).encode() for block in (BLOCK_A, BLOCK_B, "")]
    prefix = PREFIX.encode()
    assert all(turn[: len(prefix)] == prefix for turn in turns)
    assert turns[0] != turns[1]


def test_it_knows_the_fence_the_service_renders():
    # The client cannot import the service; it checks blocks against the same tags.
    assert render.BLOCK_OPEN.startswith(FENCE_OPEN_TAG + "\n")
    assert render.BLOCK_CLOSE == FENCE_CLOSE_TAG
