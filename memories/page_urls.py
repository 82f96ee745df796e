"""The owner's pages (included at the root by timothy/urls.py)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from memories import access_views, store_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("queue/", views.queue, name="queue"),
    path("queue/bulk/", views.bulk, name="queue-bulk"),
    path("queue/restore/", views.restore, name="queue-restore"),
    path("memories/", views.memory_list, name="memory-list"),
    path("memories/new/", views.memory_add, name="memory-add"),
    path("memories/<int:pk>/", views.memory_detail, name="memory-detail"),
    path("memories/<int:pk>/confirm/", views.confirm, name="memory-confirm"),
    path("memories/<int:pk>/reject/", views.reject, name="memory-reject"),
    path("memories/<int:pk>/edit/", views.memory_edit, name="memory-edit"),
    path("memories/<int:pk>/reconfirm/", views.reconfirm, name="memory-reconfirm"),
    path("memories/<int:pk>/archive/", views.archive, name="memory-archive"),
    path("memories/<int:pk>/unarchive/", views.unarchive, name="memory-unarchive"),
    path("memories/<int:pk>/redact/", views.redact, name="memory-redact"),
    path("memories/<int:pk>/erase/", views.erase_from_disk, name="memory-erase-from-disk"),
    path("inspect/", views.inspect, name="inspect"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/new/", views.token_create, name="token-create"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
    path("tokens/<int:pk>/pause/", views.token_pause, name="token-pause"),
    path("tokens/<int:pk>/resume/", views.token_resume, name="token-resume"),
    path("tokens/<int:pk>/", access_views.token_access, name="token-access"),
    path("store/", store_views.store, name="store"),
    path("store/download/", store_views.download, name="store-download"),
    path("store/upload/", store_views.upload, name="store-upload"),
    path("store/import/", store_views.confirm_import, name="store-import"),
    path("store/cancel/", store_views.cancel_import, name="store-cancel"),
]
