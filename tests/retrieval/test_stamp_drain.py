"""recall's background stamps can be waited for (before a scratch database is dropped)."""

from __future__ import annotations

import threading

from retrieval import recall


def test_it_waits_for_every_queued_stamp_and_starts_afresh_after():
    release = threading.Event()
    written: list[int] = []

    def slow_stamp(number: int) -> None:
        release.wait(60)
        written.append(number)

    for number in range(3):
        recall._stamps.submit(slow_stamp, number)
    threading.Timer(0.05, release.set).start()
    recall.drain_stamps()
    assert written == [0, 1, 2]
    # A recall after the drain gets a new pool rather than a shut one.
    assert recall._stamps.submit(lambda: 7).result(timeout=60) == 7
    recall.drain_stamps()
