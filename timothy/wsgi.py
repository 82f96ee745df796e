"""WSGI entry point of the public site and API."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "timothy.settings")

application = get_wsgi_application()
