"""WSGI entry point of the public site and API."""

import os

from django.core.wsgi import get_wsgi_application

from timothy.request_body import RequestBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "timothy.settings")

application = RequestBodyMiddleware(get_wsgi_application())
