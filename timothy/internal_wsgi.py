"""WSGI entry point of the internal listener (``TIMOTHY_INTERNAL_ADDR``)."""

import os

from django.core.wsgi import get_wsgi_application

from timothy.request_body import RequestBodyMiddleware

os.environ["DJANGO_SETTINGS_MODULE"] = "timothy.internal_settings"

application = RequestBodyMiddleware(get_wsgi_application())
