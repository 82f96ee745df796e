"""WSGI entry point of the internal listener (``TIMOTHY_INTERNAL_ADDR``)."""

import os

from django.core.wsgi import get_wsgi_application

from timothy.request_body import ChunkedBodyMiddleware

os.environ["DJANGO_SETTINGS_MODULE"] = "timothy.internal_settings"

application = ChunkedBodyMiddleware(get_wsgi_application())
