"""A query as English lexemes, the way PostgreSQL's ``to_tsvector('english', …)``
sees it, and the OR-query the text leg and BM25 match with.

Any text is a valid query: the lexemes come from PostgreSQL's own parser and go
back as quoted tsquery operands, so operators, quotes and backslashes in the
user's text can never become tsquery syntax.
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


def quote_lexeme(lexeme: str) -> str:
    # tsquery input: a quoted operand doubles its quotes and backslashes.
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def or_tsquery(lexemes: list[str]) -> str:
    """The text of a tsquery matching any of ``lexemes``; cast it with ``::tsquery``.

    The cast, unlike ``to_tsquery('english', …)``, does not stem the lexemes a
    second time, so they stay exactly those of the memories' ``tsv``.
    """
    return " | ".join(quote_lexeme(lexeme) for lexeme in lexemes)
