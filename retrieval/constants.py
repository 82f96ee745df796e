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

# How each leg's list becomes part of one score, per fusion profile (below).
#
# "zscore" (the default): each scored leg's scores are standardised over the
# list the leg returned, z = (score - mean) / standard deviation, clipped at 0,
# so a memory counts by how far it stands out from the leg's other candidates.
# A leg with one clear winner speaks loudly, a leg whose candidates all share
# a common word barely at all; ranks alone (RRF) cannot tell the two apart.
# "rrf": the seed's reciprocal rank fusion, score += weight / (k + rank).
ZSCORE = "zscore"
RRF = "rrf"
# A leg's list shorter than this is standardised as if the missing places held
# memories scoring 0 (a memory the leg did not find): two matches among an
# owner's memories are not "one above and one below the mean".
ZSCORE_MIN_REFERENCE = 5

# The seed's text ranker (ts_rank over an OR of the query's lexemes) and ours.
TS_RANK = "ts_rank"
BM25 = "bm25"

# How the entity leg finds the names a query names. "words" (ours): whole
# words, any case, every word-bounded stretch of the query up to
# ENTITY_MAX_CHARS ("Ann" is in "Ann's", not in "annual"). "substring" (seed
# 000): any name that occurs anywhere in the query, position(lower(name) IN
# lower(query)), whatever its length ("Ann" is in "annual" too).
ENTITY_WORDS = "words"
ENTITY_SUBSTRING = "substring"


@dataclass(frozen=True)
class FusionProfile:
    """One complete configuration of the fusion pipeline (docs/evaluation.md)."""

    name: str
    combine: str
    text_ranker: str
    # Multiplies each leg's part of the score.
    leg_weights: dict[str, float]
    # "rrf" only.
    rrf_k: float = 60.0
    # Recency decay, 0.5 ** (days since last confirmed / half-life), on these
    # types; None: age alone never lowers a score.
    decay_half_life_days: float | None = None
    decay_types: tuple[str, ...] = ()
    # Whether TypeProfile.weight multiplies the score.
    type_weights: bool = False
    # Scores at or below this are cut: returning nothing beats returning noise.
    min_score: float = 0.0
    # "words" or "substring" (ENTITY_WORDS, ENTITY_SUBSTRING above).
    entity_match: str = ENTITY_WORDS
    # Candidates scoring less than this share of the best one are cut (0: none).
    relative_cut: float = 0.0
    # A text match on a memory whose meaning is far from the query's counts
    # less: its part is multiplied by clip((cosine - low) / (high - low), 0, 1).
    # None: no gate. Calibrated on all-MiniLM-L6-v2 (docs/evaluation.md).
    semantic_gate: tuple[float, float] | None = None
    # Whether a query that asks how things stand now ("these days", "still",
    # "currently", ...) prefers newer memories (see CURRENT_STATE_*).
    current_state: bool = False
    # Largest share of the token budget one memory may take; a longer one is
    # cut short with an ellipsis. None: memories are packed whole or not at all.
    max_item_share: float | None = None
    # The block ends where the scores fall off: a candidate under this share of
    # the best one's score stays out of the block (it still counts in the
    # ranking), and a list that never falls off ends after block_max_memories.
    # One clear winner comes alone; two or three leaders that score alike (a
    # question needing several memories) come together. 0 / None: the token
    # budget alone ends the block. Measured in docs/evaluation.md.
    block_falloff: float = 0.0
    block_max_memories: int | None = None


DEFAULT_PROFILE = FusionProfile(
    name="default",
    combine=ZSCORE,
    text_ranker=BM25,
    leg_weights={"vector": 1.0, "text": 1.0, "entity": 1.0},
    # Every candidate whose score is not above 0 stood out in no leg.
    min_score=0.0,
    relative_cut=0.05,
    semantic_gate=(0.1, 0.4),
    current_state=True,
    max_item_share=0.25,
    block_falloff=0.15,
    block_max_memories=10,
)

# Seed 000 exactly: ts_rank text leg, entity names found anywhere in the query,
# RRF k = 60, every type decays with a 90-day half-life, type weights, minimum
# score 0.005.
SEED_PROFILE = FusionProfile(
    name="seed",
    combine=RRF,
    text_ranker=TS_RANK,
    entity_match=ENTITY_SUBSTRING,
    leg_weights={"vector": 1.0, "text": 1.0, "entity": 1.0},
    rrf_k=60.0,
    decay_half_life_days=90.0,
    decay_types=("semantic", "preference", "episodic", "reflection"),
    type_weights=True,
    min_score=0.005,
)

PROFILES: dict[str, FusionProfile] = {p.name: p for p in (DEFAULT_PROFILE, SEED_PROFILE)}

# Current-state questions ("Where do I live now?", "Am I still on metoprolol?")
# want the memory that is true today. Under a profile with current_state, when
# the query says so in these words:
CURRENT_STATE_WORDS = (
    "now",
    "nowadays",
    "these days",
    "currently",
    "current",
    "still",
    "anymore",
    "any more",
    "at the moment",
    "at present",
    "latest",
    "most recent",
    "recently",
    "lately",
    "yet",
)
# - among the best SUPERSEDE_TOP candidates, a fact or preference that a newer
#   candidate replaces (the same subject and aspect: memories.about.newer_replaces)
#   drops below it, its score multiplied by SUPERSEDED_FACTOR at least;
SUPERSEDE_TOP = 5
SUPERSEDED_FACTOR = 0.3
# - and the store is asked, for each of those about the aspect the question
#   names (any, if it names none), for memories written later about the same
#   subject and aspect (the newest SUCCESSORS_EACH): one whose vector is at
#   least SUCCESSOR_MIN_SIMILARITY alike the older memory's answers what it
#   answered ("Who is my manager now?" matched the old manager's memory; the
#   new one names another person), so it joins the candidates with the older
#   one's relevance times that likeness; a lent place replaces nothing unless
#   the legs ranked that memory among the best five too (fusion's
#   _join_successors). On the labelled pairs' dev split
#   (tests/memories/data/about-pairs.json) 47 of 49 updates are at least 0.3
#   alike; what keeps a neighbouring topic out is the aspect, not this floor;
SUCCESSORS_EACH = 5
SUCCESSOR_MIN_SIMILARITY = 0.3
# - a memory about what the query asks of (its subject and aspect: "Which town do
#   I live in now?" asks of the owner's home) is multiplied by ASKED_ASPECT_FACTOR;
ASKED_ASPECT_FACTOR = 1.25
SUPERSEDABLE_TYPES = ("semantic", "preference")
# - and the score of each memory about whom the question asks is multiplied
#   by 0.5 ** (days since written / this), so that of two good answers the
#   newer wins (a year: on personal-dev, knowledge-update R@1 63.6 at two
#   years, 66.7 at one, the other categories unchanged).
CURRENT_STATE_HALF_LIFE_DAYS = 365.0

# Text leg: BM25 over the memories' English lexemes, with the freshness
# pipeline's k1 but less length normalisation: memories are a sentence or two,
# and a longer one is longer because it says more, not because it repeats itself.
TEXT_BM25_B = 0.5

# A recall whose as_of is within this many seconds of now reads BM25's N and
# average memory length from the owner's corpus sums (OwnerCorpusChange);
# a replay further in the past counts them from the memories (a read of every
# active memory of the owner, docs/benchmarks.md) and reuses them this long per
# (owner, as_of).
BM25_CORPUS_STATS_TTL_SECONDS = 60.0

# BM25's ties are ordered by each memory's reference time. For an owner of at
# least this many active memories it is read afterwards, only for the leaders
# whose score another one shares (~0.6 ms): a question's postings there run to
# tens of thousands, and sending every posting's date cost up to 7 ms. Below
# it, the postings are few and their dates come with them (docs/benchmarks.md).
BM25_DEFERRED_DATES_MIN_MEMORIES = 20_000

# A recall whose as_of lies more than this many seconds in the past replays the
# store as it stood then (retrieval/replay.py) and stamps nothing.
REPLAY_AFTER_SECONDS = 60.0

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

LEGS = ("vector", "text", "entity")

# Vector leg. The HNSW index serves every owner at once, so a walk filtered to
# one owner's rows visits about (table rows / owner rows) tuples for each row
# it keeps, each a heap fetch: for an owner among many, the filtered walk is
# many times slower than an exact scan of their rows (docs/benchmarks.md).
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
# The exact scan shortlists this many of the owner's vectors (at least twice
# the leg's limit) at half precision, then scores them from the float32 ones.
EXACT_SCAN_SHORTLIST = 60

# Entity leg (ENTITY_WORDS): the longest entity name, in characters, that is looked
# for in a query (every word-bounded stretch of the query up to this long is a candidate).
ENTITY_MAX_CHARS = 64

# Threads that run legs; shared by concurrent recalls in one process.
LEG_WORKERS = 8

# last_retrieved_at is re-stamped at most this often: the archival rule that
# reads it counts in months (see retrieval/recall.py).
STAMP_GRANULARITY = timedelta(hours=1)
