#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "timothy.settings")
    from django.core.management import execute_from_command_line

    from timothy.env import InvalidSetting

    try:
        execute_from_command_line(sys.argv)
    except InvalidSetting as error:
        # A bad environment variable: its one sentence, not a traceback.
        sys.exit(f"Configuration error: {error}")


if __name__ == "__main__":
    main()
