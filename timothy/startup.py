"""What runs before a command: the explicit start-up steps the settings leave out.

Importing the settings computes values and nothing else: no folder is made, no
file written, no server started. ``manage.py`` (and so `make run`) calls
``prepare`` before every command, and the test suite calls the same steps
(tests/conftest.py):

- ``prepare_data_dir``: the data folder exists, and so do the generated secret
  key (when ``SECRET_KEY`` is not set) and the folder ``collectstatic`` fills;
- ``timothy.database.ensure_running``: the embedded PostgreSQL runs, for every
  command but those that need no database (``COMMANDS_WITHOUT_DATABASE``, and
  any command asked for its help: ``-h``, ``--help``, ``help``); ``check``
  starts it only when told to check a database (``--database``).
"""

from __future__ import annotations

import os
import secrets
import warnings
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from timothy.env import read_secret_key

# manage.py commands that never connect: they run without starting PostgreSQL.
COMMANDS_WITHOUT_DATABASE = frozenset(
    {
        "check",
        "collectstatic",
        "compilemessages",
        "diffsettings",
        "findstatic",
        "help",
        "makemessages",
        "makemigrations",
        "spectacular",
        "startapp",
        "startproject",
        "version",
    }
)


def ensure_secret_key(path: Path) -> str:
    """The secret key kept in ``path``, generated there first if there is none.

    Made once and kept with the data, so sessions survive a restart without
    anyone having to invent a secret. Created exclusively: of two processes
    starting at once, both end up with the one key.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_secret_key(path)
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_urlsafe(50))
    return read_secret_key(path)


def prepare_data_dir() -> None:
    """Make the data folder, its static files folder and (if needed) the secret key."""
    from django.conf import settings

    Path(settings.DATA_DIR).mkdir(parents=True, exist_ok=True)
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    if not _has_secret_key(settings):
        settings.SECRET_KEY = ensure_secret_key(Path(settings.SECRET_KEY_FILE))


def _has_secret_key(settings) -> bool:
    try:
        return bool(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django's refusal of an empty one
        return False


# Options that make any command print its help and stop.
HELP_OPTIONS = frozenset({"-h", "--help"})


def asks_for_help(options: list[str]) -> bool:
    """Whether a command's ``options`` ask for its help (as argparse reads them:
    anywhere before a ``--``)."""
    for option in options:
        if option == "--":
            return False
        if option in HELP_OPTIONS:
            return True
    return False


def needs_database(argv: list[str]) -> bool:
    """Whether the manage.py command in ``argv`` may connect to the database."""
    command = argv[1] if len(argv) > 1 else "help"
    options = argv[2:]
    if command.startswith("-") or asks_for_help(options):
        return False
    if command == "check":
        # Database checks run only when named (`check --database default`).
        return any(option.split("=", 1)[0] == "--database" for option in options)
    return command not in COMMANDS_WITHOUT_DATABASE


def prepare(argv: list[str]) -> None:
    """Everything a manage.py command needs before it runs."""
    from timothy.database import ensure_running

    prepare_data_dir()
    if needs_database(argv):
        ensure_running()
    else:
        # makemigrations compares the migration history with the database's if
        # it can reach one; with no server started it says so at length.
        warnings.filterwarnings(
            "ignore", message="Got an error checking a consistent migration history"
        )
