"""The owner's page per API token: what its searches received (memories/access_log.py)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from memories.access_log import AccessRecord
from memories.api_tokens import ApiToken
from memories.models import Memory
from memories.views import PAGE_SIZE, owner_time_zone


@dataclass
class Delivered:
    """One search on the token page: the record, and its memories in packed order
    (None where a memory id no longer names one of the owner's memories)."""

    record: AccessRecord
    memories: list[tuple[int, Memory | None]]


@login_required
@owner_time_zone
@require_GET
def token_access(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.filter(owner=request.user), pk=pk)
    records = AccessRecord.objects.filter(owner=request.user, token=token).order_by("-at", "-id")
    page = Paginator(records, PAGE_SIZE).get_page(request.GET.get("page"))
    ids = {pk for record in page.object_list for pk in record.memory_ids}
    memories = Memory.objects.for_owner(request.user).filter(pk__in=ids).only("content", "status")
    by_id = {memory.pk: memory for memory in memories}
    return render(
        request,
        "memories/token_access.html",
        {
            "token": token,
            "page": page,
            "deliveries": [
                Delivered(record, [(pk, by_id.get(pk)) for pk in record.memory_ids])
                for record in page.object_list
            ],
            "total": page.paginator.count,
            "access_log_days": settings.ACCESS_LOG_DAYS,
        },
    )
