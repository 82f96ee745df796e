"""Throw-away databases on the same PostgreSQL server.

The store never deletes, so evaluations and benchmarks load their data into a
database of their own and drop it afterwards. CREATE and DROP DATABASE cannot
run inside a transaction, so both go through an autocommit connection to the
server's maintenance database.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections


def database_exists(name: str, alias: str = DEFAULT_DB_ALIAS) -> bool:
    with connections[alias]._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def create_database(name: str, alias: str = DEFAULT_DB_ALIAS) -> None:
    connection = connections[alias]
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")


def drop_database(name: str, alias: str = DEFAULT_DB_ALIAS) -> None:
    """Drop ``name`` if it exists, ending every connection still open to it."""
    connection = connections[alias]
    # FORCE: worker threads' idle connections (retrieval legs) go too.
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)")


def drop_secondary_indexes(cursor, table: str) -> list[tuple[str, str]]:
    """Drop every index of ``table`` but its primary key; return (name, definition) pairs.

    A bulk load into a scratch database is much faster with the indexes built
    once afterwards (execute each definition) than maintained row by row.
    """
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
        "AND indexname NOT LIKE '%%_pkey'",
        [table],
    )
    indexes = cursor.fetchall()
    for name, _ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    return indexes
