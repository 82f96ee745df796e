"""A query as English lexemes, the way PostgreSQL's ``to_tsvector('english', …)``
sees it.

Any text is a valid query: the lexemes come from PostgreSQL's own parser and are
then only compared as text with the postings' terms, so operators, quotes and
backslashes in the user's text can never become tsquery syntax.
"""

from __future__ import annotations


def clean_query(query: str) -> str:
    """The query as PostgreSQL can store it: no NUL characters, no lone surrogates."""
    return query.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


def query_lexemes(cursor, query: str) -> list[str]:
    """Distinct English lexemes of ``query``, sorted; [] for only stop words or punctuation."""
    cursor.execute(
        "SELECT coalesce(tsvector_to_array(to_tsvector('english', %s)), '{}')",
        [clean_query(query)],
    )
    return list(cursor.fetchone()[0])
