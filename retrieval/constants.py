"""Tuning numbers of both retrieval pipelines: the one place each is defined.

Only values that differ between deployments are settings (timeouts, default
budget); these are properties of the algorithms and change with a measured
reason (see docs/evaluation.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from memories.models import MemoryType
from retrieval.names import PIPELINES  # noqa: F401  (defined there for settings)

# How many candidates each leg of the fusion pipeline returns.
LEG_LIMIT = 30

# Weighted reciprocal rank fusion: score += LEG_WEIGHTS[leg] / (RRF_K + rank),
# rank counted from 1. The seed's k = 60 (from fusing many 1000-deep TREC runs)
# makes a leg's 1st and 30th candidate differ by only 1.5x, so within-leg order
# barely counts and decay decides the ranking; k = 2 lets it count (R@5 on
# locomo-dev 46 -> 57 with everything else equal; see docs/evaluation.md).
RRF_K = 2
# BM25 (the text leg) is the strongest single leg on conversation data; the
# vector leg still adds what words miss. Measured in docs/evaluation.md.
LEG_WEIGHTS = {"vector": 1.0, "text": 1.5, "entity": 1.0}

# Recency decay of the fusion pipeline: 0.5 ** (days since confirmed / half-life).
DECAY_HALF_LIFE_DAYS = 90.0

# Fused scores below this are cut: returning nothing beats returning stale noise.
# The seed's 0.005 was set for k = 60; carried over to RRF_K so that a leg's last
# candidate (rank LEG_LIMIT, weight 1) is still cut once decay x type weight
# falls below 0.45, as under the seed (about 100 days for a fact).
SEED_RRF_K = 60
SEED_MIN_SCORE = 0.005
MIN_SCORE = SEED_MIN_SCORE * (SEED_RRF_K + LEG_LIMIT) / (RRF_K + LEG_LIMIT)

# Text leg: BM25 over the memories' English lexemes, with the freshness
# pipeline's k1 but less length normalisation: memories are a sentence or two,
# and a longer one is longer because it says more, not because it repeats itself.
TEXT_BM25_B = 0.5

# A recall whose as_of is within this many seconds of now reads BM25's N and
# average memory length from the owner's corpus sums (OwnerCorpusChange);
# a replay further in the past counts them from the memories (about 118 ms at
# 100k) and reuses them this long per (owner, as_of) (docs/benchmarks.md).
BM25_CORPUS_STATS_TTL_SECONDS = 60.0

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
    # Whether the fusion pipeline's recency decay applies. Facts, preferences and
    # reflections can go stale while nobody re-confirms them; a record of an
    # event stays true however old it is (the freshness pipeline is there for
    # owners who want recent events first).
    decays: bool = True


# One table for everything that depends on a memory's type.
TYPE_PROFILES: dict[str, TypeProfile] = {
    MemoryType.SEMANTIC: TypeProfile(weight=1.0, half_life_days=7.0),
    MemoryType.PREFERENCE: TypeProfile(weight=1.0, half_life_days=30.0),
    MemoryType.EPISODIC: TypeProfile(weight=0.9, half_life_days=3.0, decays=False),
    MemoryType.REFLECTION: TypeProfile(weight=0.8, half_life_days=14.0),
}

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
