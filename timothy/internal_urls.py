"""Internal URLconf: served only by the internal listener, never by the public one."""

urlpatterns: list = []
