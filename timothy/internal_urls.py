"""Internal URLconf: served only by the internal listener, never by the public one."""

from django.urls import include, path

urlpatterns = [
    path("", include("memories.internal_api_urls")),
]

# Everything here is API: errors are always JSON.
handler400 = "memories.errors.json_bad_request"
handler404 = "memories.errors.json_not_found"
handler500 = "memories.errors.json_server_error"
