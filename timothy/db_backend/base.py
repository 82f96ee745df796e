"""Django's PostgreSQL backend, with connections that give up on a frozen server
(``timothy.database.GuardedConnection``)."""

from django.db.backends.postgresql import base

from timothy.database import GuardedPsycopg


class DatabaseWrapper(base.DatabaseWrapper):
    Database = GuardedPsycopg()
