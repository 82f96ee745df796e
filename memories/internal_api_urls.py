"""Routes of the internal listener only; timothy/urls.py never includes this module."""

from django.urls import path

from memories import internal_api

urlpatterns = [
    path("internal/v1/retrieve", internal_api.retrieve, name="internal-retrieve"),
    path("internal/v1/extract", internal_api.extract, name="internal-extract"),
]
