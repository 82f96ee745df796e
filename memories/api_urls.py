"""The public API's routes: exactly five memory routes, plus the schema and its docs.

No other /v1/ route exists and nothing catches all; tests/api/test_routes.py
walks the resolver and fails if a route is added or removed without it.
"""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memories import api

# Order matters only for readability: <int:...> never matches "search".
memory_routes = [
    path("v1/memories", api.MemoryCollectionView.as_view(), name="api-memories"),
    path("v1/memories/search", api.MemorySearchView.as_view(), name="api-search"),
    path("v1/memories/<int:memory_id>", api.MemoryDetailView.as_view(), name="api-memory"),
    path(
        "v1/memories/<int:memory_id>/chain",
        api.MemoryChainView.as_view(),
        name="api-memory-chain",
    ),
]

urlpatterns = [
    *memory_routes,
    path("api/schema/", SpectacularAPIView.as_view(patterns=memory_routes), name="api-schema"),
    # The split view loads its start-up script from its own URL (?script), and
    # api_docs.html moves the stylesheet out of the page: no inline code, so the
    # page lives under the site's Content-Security-Policy.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
]
