"""Django's PostgreSQL backend, with connections that give up on a frozen server
(``timothy.database.GuardedConnection``)."""

from django.db.backends.postgresql import base

from timothy.database import GuardedPsycopg, quiet_and_idle


class DatabaseWrapper(base.DatabaseWrapper):
    Database = GuardedPsycopg()

    def close_if_health_check_failed(self) -> None:
        """Django's check before a request's first query, with no round trip when
        the connection is idle and the server sent nothing (``quiet_and_idle``);
        else the real one."""
        if self.connection is None or not self.health_check_enabled or self.health_check_done:
            return
        if not quiet_and_idle(self.connection) and not self.is_usable():
            self.close()
        self.health_check_done = True
