#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "timothy.settings")
    from django.core.management import execute_from_command_line

    from timothy.env import InvalidSetting
    from timothy.startup import prepare

    try:
        # The explicit start-up step: data folder, secret key, and the embedded
        # PostgreSQL for commands that use the database (timothy/startup.py).
        prepare(sys.argv)
        execute_from_command_line(sys.argv)
    except InvalidSetting as error:
        # A bad environment variable: its one sentence, not a traceback.
        sys.exit(f"Configuration error: {error}")


if __name__ == "__main__":
    main()
