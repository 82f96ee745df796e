"""What the client adds to a recall: ``Memory.recall`` against a bare HTTP POST.

    TIMOTHY_URL=http://127.0.0.1:8000 TIMOTHY_TOKEN=tm_… \\
        python client/benchmarks/recall_overhead.py --calls 1000

Against a running service (warmed up first), the same query is sent, calls
interleaved, three ways: a bare ``requests`` POST on a kept-alive session with
the JSON decoded (the floor any Python caller pays); the client's request and
parsing without its deadline thread; and ``Memory.recall`` as a caller uses it
(request, checks, typed result, hard deadline on a worker thread). Prints the
medians and the median of the per-call differences, then the client's own work
timed without the network (checking and typing an answer; the thread hand-off),
which the service's own variance hides on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

import requests

from timothy_client import Memory, Recall

QUERY = "Which seat do I like on long flights, and what do I drink in the morning?"
SEED_FACTS = [
    ("Prefers an aisle seat on long-haul flights.", "preference", ["long-haul flights"]),
    ("Drinks green tea in the morning.", "preference", ["green tea"]),
    ("Flies to Tokyo twice a year for work.", "episodic", ["Tokyo"]),
    ("Is allergic to peanuts.", "semantic", ["peanuts"]),
]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TIMOTHY_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("TIMOTHY_TOKEN"))
    parser.add_argument("--calls", type=int, default=1000, help="timed calls of each kind")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls first")
    parser.add_argument("--seed", type=int, default=20, help="memories to add first (0: none)")
    options = parser.parse_args()
    if not options.token:
        parser.error("give --token or set TIMOTHY_TOKEN")

    memory = Memory(options.url, options.token, timeout=30)
    run = uuid.uuid4().hex[:6]
    for n in range(options.seed):
        content, kind, entities = SEED_FACTS[n % len(SEED_FACTS)]
        memory.remember(f"{content} (benchmark {run}-{n})", kind, entities=entities)

    bare = requests.Session()
    bare.headers["Authorization"] = f"Bearer {options.token}"
    url = options.url.rstrip("/") + "/v1/memories/search"
    body = {"query": QUERY}

    def bare_post() -> None:
        response = bare.post(url, json=body, timeout=30)
        response.raise_for_status()
        response.json()

    def client_without_deadline() -> None:
        memory._search(body, 30)

    def client_recall() -> None:
        if not memory.recall(QUERY).ok:
            raise SystemExit("a recall failed during the benchmark")

    kinds = {
        "bare requests POST + json": bare_post,
        "client, no deadline thread": client_without_deadline,
        "Memory.recall": client_recall,
    }
    for _ in range(options.warmup):
        for call in kinds.values():
            call()
    timings: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(options.calls):
        for name, call in kinds.items():
            start = time.perf_counter()
            call()
            timings[name].append((time.perf_counter() - start) * 1000)

    # The client's own work, without the network's noise: checking and typing one
    # real answer, and handing a call to the deadline thread and back.
    answer = bare.post(url, json=body, timeout=30).json()
    parse = _micro(lambda: Recall.from_json(answer), options.calls)
    handoff = _micro(lambda: memory._recall_pool.submit(int).result(), options.calls)

    blocks = memory.recall(QUERY)
    print(
        f"recall overhead: {options.calls} calls of each kind, interleaved, against {options.url} "
        f"({len(blocks.memories)} memories, {blocks.tokens} tokens in the block)"
    )
    for name, values in timings.items():
        print(
            f"  {name:28} median {statistics.median(values):7.3f} ms   "
            f"p95 {percentile(values, 0.95):7.3f} ms"
        )
    floor = timings["bare requests POST + json"]
    for name in ("client, no deadline thread", "Memory.recall"):
        differences = [mine - theirs for mine, theirs in zip(timings[name], floor, strict=True)]
        print(f"  overhead of {name:26} median {statistics.median(differences):+7.3f} ms per call")
    print(
        f"  client-side work alone: checking and typing the answer {parse * 1000:.0f} µs, "
        f"the deadline thread's hand-off {handoff * 1000:.0f} µs (medians)"
    )
    memory.close()


def _micro(call, repeats: int) -> float:
    """Median milliseconds of ``call``."""
    timings = []
    for _ in range(max(repeats, 100)):
        start = time.perf_counter()
        call()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


if __name__ == "__main__":
    main()
