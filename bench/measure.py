"""Small helpers the benchmark commands share: the fills' COPY layout, percentiles and
an honest word for the load."""

from __future__ import annotations

import os

# The fills write memories with a binary COPY: these columns, of these types.
COPY_COLUMNS = (
    "owner_id, type, content, status, entity_refs, embedding, confidence, source, "
    "session_id, metadata, created_at, last_confirmed_at"
)
COPY_TYPES = [
    "int4",
    "text",
    "text",
    "text",
    "text[]",
    "vector",
    "float8",
    "text",
    "text",
    "jsonb",
    "timestamptz",
    "timestamptz",
]
# What a memory is about, stored with it as an import or a create stores it
# (recall reads it for a current-state question and every answer shows it;
# without it, both would derive it for every memory each time): the fills
# write these columns after COPY_COLUMNS.
ABOUT_COLUMNS = ("about_subject", "about_kind", "about_aspect", "about_occasion", "about_set_by")
FILL_COLUMNS = f"{COPY_COLUMNS}, {', '.join(ABOUT_COLUMNS)}"
FILL_TYPES = [*COPY_TYPES, *["text"] * len(ABOUT_COLUMNS)]
# Load average per core above which a run is contended (more runnable
# processes than cores), and below which it is quiet.
CONTENDED_LOAD_PER_CORE = 1.0
QUIET_LOAD_PER_CORE = 0.5


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def describe_load(load: float, cores: int | None = None) -> str:
    """'4.3 on 2 cores, 2.15 per core: contended' — the load read against the cores."""
    cores = cores or os.cpu_count() or 1
    per_core = load / cores
    if per_core > CONTENDED_LOAD_PER_CORE:
        word = "contended: more runnable processes than cores"
    elif per_core >= QUIET_LOAD_PER_CORE:
        word = "busy"
    else:
        word = "quiet"
    return f"{load:.2f} on {cores} cores, {per_core:.2f} per core: {word}"


def load_average() -> float:
    return os.getloadavg()[0]
