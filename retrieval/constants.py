"""Tuning numbers of both retrieval pipelines: the one place each is defined.

Only values that differ between deployments are settings (timeouts, default
budget); these are properties of the algorithms and change with a measured
reason (see docs/evaluation.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from memories.models import MemoryType

# How many candidates each leg of the fusion pipeline returns.
LEG_LIMIT = 30

# Reciprocal rank fusion: score += 1 / (RRF_K + rank), rank counted from 1.
RRF_K = 60

# Recency decay of the fusion pipeline: 0.5 ** (days since confirmed / half-life).
DECAY_HALF_LIFE_DAYS = 90.0

# Fused scores below this are cut: returning nothing beats returning stale noise.
MIN_SCORE = 0.005

# Freshness pipeline (seed 003).
BM25_K1 = 1.2
BM25_B = 0.75
BM25_TOP = 20
RERANK_TOP = 5
RELEVANCE_WEIGHT = 0.7
FRESHNESS_WEIGHT = 0.3


@dataclass(frozen=True)
class TypeProfile:
    # Multiplies the fused score in the fusion pipeline.
    weight: float
    # Freshness half-life in the freshness pipeline: 2 ** (-age / half_life).
    half_life_days: float


# One table for everything that depends on a memory's type.
TYPE_PROFILES: dict[str, TypeProfile] = {
    MemoryType.SEMANTIC: TypeProfile(weight=1.0, half_life_days=7.0),
    MemoryType.PREFERENCE: TypeProfile(weight=1.0, half_life_days=30.0),
    MemoryType.EPISODIC: TypeProfile(weight=0.9, half_life_days=3.0),
    MemoryType.REFLECTION: TypeProfile(weight=0.8, half_life_days=14.0),
}

PIPELINES = ("fusion", "freshness")
LEGS = ("vector", "text", "entity")

# Vector leg. The HNSW index serves every owner at once, so a walk filtered to
# one owner's rows visits about (table rows / owner rows) tuples for each row
# it keeps, each a heap fetch. Measured on 1M rows, 100 owners of 10k
# (docs/benchmarks.md): the filtered walk's p95 was about 18× the exact scan's.
# So: owners with up to VECTOR_EXACT_SCAN_MAX_ROWS memories, and owners
# holding less than HNSW_MIN_OWNER_SHARE of the table, are scanned exactly;
# the index (with pgvector's iterative scan, so the walk goes on until enough
# of this owner's active rows turn up) is for owners who dominate the table.
# Both read from the planner's statistics of owner_id (see legs._owner_dominates).
VECTOR_EXACT_SCAN_MAX_ROWS = 5000
HNSW_MIN_OWNER_SHARE = 0.25
# Candidate list of the HNSW walk: at least twice LEG_LIMIT keeps recall high.
HNSW_EF_SEARCH = 100
# How far an iterative scan may walk before giving up (then: exact scan).
HNSW_MAX_SCAN_TUPLES = 20000

# Entity leg: the longest entity name, in characters, that is looked for in a
# query (every word-bounded stretch of the query up to this long is a candidate).
ENTITY_MAX_CHARS = 64

# Threads that run legs; shared by concurrent recalls in one process.
LEG_WORKERS = 8

# last_retrieved_at is re-stamped at most this often: each stamp rewrites the
# row and all its index entries, and the archival rule that reads it counts in
# months (see retrieval/recall.py).
STAMP_GRANULARITY = timedelta(hours=1)
