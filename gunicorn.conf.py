# gunicorn reads this file when started from the project folder without
# --config, so a plain `gunicorn timothy.wsgi:application` gets the same
# settings as `make run` (JSON errors, no SCRIPT_NAME from clients).
from timothy.gunicorn_conf import *  # noqa: F403
