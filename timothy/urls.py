"""Public URLconf: the owner's pages, the admin, the five API routes, the schema."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The five public memory routes and the OpenAPI schema (memories/api_urls.py).
    path("", include("memories.api_urls")),
    # The owner's pages (memories/page_urls.py).
    path("", include("memories.page_urls")),
]

# JSON errors on API paths (/v1/, /internal/, /api/), Django's pages elsewhere.
handler400 = "memories.errors.bad_request"
handler404 = "memories.errors.not_found"
handler500 = "memories.errors.server_error"
