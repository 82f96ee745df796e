"""Internal URLconf: served only by the internal listener, never by the public one."""

from django.urls import include, path

urlpatterns = [
    path("", include("memories.internal_api_urls")),
]
