"""BM25 over the owner's active memories, computed in PostgreSQL.

Terms are the query's English lexemes (the same ones the text leg uses);
a term's frequency in a memory is the number of positions the lexeme has in
its ``tsv``; a memory's length is the number of distinct lexemes in it
(``length(tsv)``: its words less the stop words and repeats — counting
positions instead would unnest every memory of the owner on every query, about
2.5 times the text leg's time at 10,000 memories, for memories that rarely
repeat a word); N, n and the average length count the owner's active memories
as of ``as_of``:

    idf(t)        = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))
    score(m)      = Σ_t idf(t) · f(t,m) · (k1 + 1) / (f(t,m) + k1 · (1 − b + b · |m| / avg|m|))
"""

from __future__ import annotations

from datetime import datetime

from memories.models import Memory
from retrieval.constants import BM25_B, BM25_K1, BM25_TOP
from retrieval.lexemes import or_tsquery, query_lexemes

MEMORY_TABLE = Memory._meta.db_table

# The moment a memory counts from at as_of: its last confirmation, unless that
# happened after as_of (a replay must not see the future), else its creation.
# (retrieval.fusion.reference_time is the same rule in Python.)
REFERENCE_TIME_SQL = (
    "CASE WHEN m.last_confirmed_at <= %(as_of)s THEN m.last_confirmed_at ELSE m.created_at END"
)


def bm25_scores(
    cursor,
    owner_id: int,
    query: str,
    as_of: datetime,
    *,
    types: tuple[str, ...] | None = None,
    top: int = BM25_TOP,
    b: float = BM25_B,
) -> list[tuple[int, float]]:
    """The ``top`` best (memory id, BM25 score) pairs, best first.

    Equal scores go most recently confirmed first: with nothing else to tell
    them apart, the newer memory is the better guess.
    """
    lexemes = query_lexemes(cursor, query)
    if not lexemes:
        return []
    params = {
        "owner_id": owner_id,
        "as_of": as_of,
        "lexemes": lexemes,
        "tsquery": or_tsquery(lexemes),
        "k1": BM25_K1,
        "b": b,
        "top": top,
        "types": list(types or ()),
    }
    # N and n count every active memory; only the answer is filtered by type.
    type_filter = "WHERE p.type = ANY(%(types)s)" if types else ""
    cursor.execute(
        f"""
        WITH corpus AS (
            SELECT count(*)::float8 AS documents, avg(length(m.tsv))::float8 AS average_length
            FROM {MEMORY_TABLE} m
            WHERE m.owner_id = %(owner_id)s AND m.status = 'active'
              AND m.created_at <= %(as_of)s
        ),
        matched AS MATERIALIZED (
            SELECT m.id, m.type, m.tsv, {REFERENCE_TIME_SQL} AS reference_time
            FROM {MEMORY_TABLE} m
            WHERE m.owner_id = %(owner_id)s AND m.status = 'active'
              AND m.created_at <= %(as_of)s AND m.tsv @@ %(tsquery)s::tsquery
        ),
        postings AS (
            SELECT o.id, o.type, o.reference_time, length(o.tsv) AS length, t.lexeme,
                   coalesce(array_length(t.positions, 1), 1) AS frequency
            FROM matched o CROSS JOIN LATERAL unnest(o.tsv) AS t
            WHERE t.lexeme = ANY(%(lexemes)s::text[])
        ),
        containing AS (SELECT lexeme, count(*)::float8 AS documents FROM postings GROUP BY lexeme)
        SELECT p.id, sum(
            ln(1 + (c.documents - n.documents + 0.5) / (n.documents + 0.5))
            * p.frequency * (%(k1)s + 1)
            / (p.frequency + %(k1)s * (1 - %(b)s + %(b)s * p.length / c.average_length))
        ) AS score
        FROM postings p
        JOIN containing n USING (lexeme)
        CROSS JOIN corpus c
        {type_filter}
        GROUP BY p.id
        ORDER BY score DESC, max(p.reference_time) DESC, p.id DESC
        LIMIT %(top)s
        """,
        params,
    )
    return [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]
