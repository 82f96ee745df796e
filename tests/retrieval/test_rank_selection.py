"""The text and entity legs' top-k: the first rows of a full sort, ties and all,
and BM25's equal scores ordered by reference times read only for them."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.bm25 import rank_bm25
from retrieval.posting_lists import PostingLists, first_in_order


@pytest.mark.parametrize("seed", range(40))
def test_it_picks_what_a_full_sort_picks(seed):
    generator = np.random.default_rng(seed)
    rows = int(generator.integers(1, 400))
    top = int(generator.integers(1, 60))
    # Few distinct values, so ties on the first key (and the second) are the rule.
    scores = -generator.integers(0, 6, rows).astype(np.float64) / 3
    latest = -generator.integers(0, 4, rows)
    ids = -generator.permutation(rows)
    keys = (ids, latest, scores)

    assert first_in_order(keys, top).tolist() == np.lexsort(keys)[:top].tolist()


def test_ties_on_every_key_keep_the_order_of_a_stable_sort():
    keys = (np.zeros(50), np.zeros(50))

    assert first_in_order(keys, 10).tolist() == list(range(10))


def test_it_returns_every_row_when_there_are_fewer_than_asked():
    keys = (np.array([3, 1, 2]),)

    assert first_in_order(keys, 10).tolist() == [1, 2, 0]


def test_it_returns_nothing_for_a_top_of_zero():
    assert first_in_order((np.array([1.0, 2.0]),), 0).tolist() == []


def postings_with_ties(seed: int) -> PostingLists:
    """Three terms over 300 memories, frequencies and lengths from a few values
    (so that many memories score exactly alike), each memory one reference time."""
    generator = np.random.default_rng(seed)
    term_index, memory_ids = [], []
    for term in range(3):
        holders = generator.choice(300, size=int(generator.integers(40, 200)), replace=False)
        term_index += [term] * len(holders)
        memory_ids += sorted(holders.tolist())
    memory_ids = np.array(memory_ids, dtype=np.int64) + 1000
    times = generator.integers(0, 10**12, 1300)
    return PostingLists(
        terms=["a", "b", "c"],
        documents=np.bincount(term_index).astype(np.float64),
        term_index=np.array(term_index, dtype=np.int64),
        memory_ids=memory_ids,
        frequency=generator.integers(1, 3, len(memory_ids)).astype(np.float64),
        length=generator.integers(3, 5, len(memory_ids)).astype(np.float64),
        reference_time=times[memory_ids - 1000],
    )


@pytest.mark.parametrize("seed", range(10))
def test_bm25_reads_reference_times_for_equal_scores_only(seed):
    postings = postings_with_ties(seed)
    times = dict(zip(postings.memory_ids.tolist(), postings.reference_time.tolist(), strict=True))
    asked: list[int] = []

    def reference_times_of(memory_ids):
        asked.extend(memory_ids.tolist())
        return {memory_id: times[memory_id] for memory_id in memory_ids.tolist()}

    without_times = PostingLists(**{**postings.__dict__, "reference_time": None})
    expected = rank_bm25(postings, 300.0, 3.5, top=30)
    got = rank_bm25(without_times, 300.0, 3.5, top=30, reference_times_of=reference_times_of)

    assert got == expected
    scores = [score for _, score in expected]
    tied_in_answer = {memory_id for memory_id, score in expected if scores.count(score) > 1}
    assert tied_in_answer, "the postings must give equal scores to order"
    assert tied_in_answer <= set(asked)
    assert len(asked) < len(set(postings.memory_ids.tolist())) / 2


def test_bm25_refuses_to_guess_the_order_of_equal_scores():
    postings = postings_with_ties(0)
    without_times = PostingLists(**{**postings.__dict__, "reference_time": None})

    with pytest.raises(ValueError, match="equal scores"):
        rank_bm25(without_times, 300.0, 3.5, top=30)
