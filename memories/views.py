"""The owner's pages: home, confirmation queue, memory browser, chain view,
retrieval inspector and API tokens.

Views stay thin: every state change is a model method, every search goes
through ``retrieval.recall.recall``. Every query is scoped to the signed-in
owner, so another owner's id is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.postgres.search import SearchQuery
from django.core.paginator import Paginator
from django.db.models import BooleanField, Count, Q
from django.db.models.expressions import RawSQL
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import Truncator
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memories.diff import DiffPiece, word_diff
from memories.forms import (
    REASON_MAX_CHARS,
    BulkActionForm,
    InspectForm,
    MemoryEditForm,
    MemoryFilterForm,
    ReasonForm,
    TokenForm,
)
from memories.inspector import score_bars
from memories.models import ApiToken, IllegalTransition, Memory, MemoryEvent
from retrieval.constants import MIN_SCORE
from retrieval.recall import recall
from retrieval.results import RecallFailed

VIA = "page"
PAGE_SIZE = 25
QUEUE_PAGE_SIZE = 50
LATEST_EVENTS = 12
# How many of each leg's hits the inspector lists.
LEG_PREVIEW = 10
# Session key holding a freshly issued token until the tokens page shows it once.
NEW_TOKEN_SESSION_KEY = "timothy_new_token"
# Set by static/js/timothy.js to the browser's IANA time zone.
TIME_ZONE_COOKIE = "timothy_tz"


def _zone(name: str) -> ZoneInfo | None:
    if not name or len(name) > 64:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def owner_time_zone(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Show times in the browser's time zone when it told us one, else settings.TIME_ZONE."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        zone = _zone(request.COOKIES.get(TIME_ZONE_COOKIE, ""))
        if zone is None:
            return view(request, *args, **kwargs)
        with timezone.override(zone):
            return view(request, *args, **kwargs)

    return wrapper


def _owned(request: HttpRequest, pk: int) -> Memory:
    return get_object_or_404(Memory.objects.for_owner(request.user), pk=pk)


def _quote(memory: Memory) -> str:
    return f"“{Truncator(memory.content).chars(60)}”"


def _back(request: HttpRequest, default: str) -> HttpResponse:
    """Redirect to the page the form came from, if it is one of ours."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect(default)


# --- home ----------------------------------------------------------------------


@login_required
@owner_time_zone
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    memories = Memory.objects.for_owner(request.user)
    counts = {
        (row["status"], row["type"]): row["n"]
        for row in memories.order_by().values("status", "type").annotate(n=Count("id"))
    }
    by_type = [
        {
            "type": type_label,
            "value": type_value,
            "cells": [
                (label, counts.get((status, type_value), 0))
                for status, label in Memory.Status.choices
            ],
            "total": sum(counts.get((status, type_value), 0) for status in Memory.Status.values),
        }
        for type_value, type_label in Memory.Type.choices
    ]
    status_totals = [
        {
            "value": status,
            "label": label,
            "count": sum(n for (s, _), n in counts.items() if s == status),
        }
        for status, label in Memory.Status.choices
    ]
    events = (
        MemoryEvent.objects.filter(owner=request.user)
        .exclude(action=MemoryEvent.Action.PROPOSED)
        .select_related("memory", "actor")
        .order_by("-at", "-id")[:LATEST_EVENTS]
    )
    return render(
        request,
        "memories/home.html",
        {
            "by_type": by_type,
            "status_totals": status_totals,
            "statuses": Memory.Status.choices,
            "total": sum(counts.values()),
            "waiting": sum(n for (s, _), n in counts.items() if s == Memory.Status.PROPOSED),
            # Found by text and entity meanwhile; the worker's catch-up embeds them.
            "awaiting_vector": (
                memories.awaiting_embedding().count()
                if settings.EMBEDDING_PROVIDER != "none"
                else 0
            ),
            "events": events,
        },
    )


# --- confirmation queue ----------------------------------------------------------


@login_required
@owner_time_zone
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    pending = Memory.objects.for_owner(request.user).pending()
    page = Paginator(pending, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "memories/queue.html",
        {"page": page, "proposals": page.object_list, "reason_form": ReasonForm()},
    )


@login_required
@owner_time_zone
@require_POST
def confirm(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        memory.confirm(actor=request.user, via=VIA, reason=reason)
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Confirmed {_quote(memory)}")
    return _back(request, "queue")


@login_required
@owner_time_zone
@require_POST
def reject(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The reason is too long ({REASON_MAX_CHARS} characters at most).")
        return _back(request, "queue")
    try:
        memory.reject(actor=request.user, via=VIA, reason=form.cleaned_data["reason"])
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Rejected {_quote(memory)}")
    return _back(request, "queue")


@login_required
@owner_time_zone
@require_POST
def bulk(request: HttpRequest) -> HttpResponse:
    form = BulkActionForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return redirect("queue")
    ids = set(form.cleaned_data["ids"])
    memories = list(Memory.objects.for_owner(request.user).filter(pk__in=ids).order_by("pk"))
    if len(memories) != len(ids):
        # Some id is not the owner's (or does not exist): the same answer as anywhere else.
        get_object_or_404(Memory.objects.none())
    action = form.cleaned_data["action"]
    reason = form.cleaned_data["reason"]
    done, failures = 0, []
    for memory in memories:
        try:
            if action == "confirm":
                memory.confirm(actor=request.user, via=VIA, reason=reason)
            else:
                memory.reject(actor=request.user, via=VIA, reason=reason)
        except IllegalTransition as error:
            failures.append(error.message)
        else:
            done += 1
    past = "Confirmed" if action == "confirm" else "Rejected"
    if done:
        messages.success(request, f"{past} {done} {'memory' if done == 1 else 'memories'}.")
    for failure in failures:
        messages.error(request, failure)
    return redirect("queue")


# --- memory browser ----------------------------------------------------------------


def _filtered(owner, form: MemoryFilterForm):
    memories = Memory.objects.for_owner(owner)
    if not form.is_valid():
        return memories
    data = form.cleaned_data
    if data["q"]:
        memories = memories.filter(
            Q(content__icontains=data["q"])
            | Q(tsv=SearchQuery(data["q"], config="english", search_type="websearch"))
        )
    for name in ("status", "type", "source"):
        if data[name]:
            memories = memories.filter(**{name: data[name]})
    if data["entity"]:
        memories = memories.filter(
            RawSQL(
                "EXISTS (SELECT 1 FROM unnest(entity_refs) AS e WHERE lower(e) = lower(%s))",
                [data["entity"].strip()],
                output_field=BooleanField(),
            )
        )
    if data["created_from"]:
        memories = memories.filter(created_at__date__gte=data["created_from"])
    if data["created_to"]:
        memories = memories.filter(created_at__date__lte=data["created_to"])
    return memories.order_by(*form.ordering())


@login_required
@owner_time_zone
@require_GET
def memory_list(request: HttpRequest) -> HttpResponse:
    form = MemoryFilterForm(request.GET or None)
    if form.is_bound:
        memories = _filtered(request.user, form)
    else:
        memories = Memory.objects.for_owner(request.user).order_by("-created_at", "-id")
    page = Paginator(memories, PAGE_SIZE).get_page(request.GET.get("page"))
    filtering = form.is_bound and any(
        value for key, value in request.GET.items() if key not in ("page", "sort")
    )
    return render(
        request,
        "memories/memory_list.html",
        {"form": form, "page": page, "memories": page.object_list, "filtering": filtering},
    )


# --- memory detail and chain -----------------------------------------------------


@dataclass
class Version:
    memory: Memory
    is_head: bool
    is_current: bool
    # The rows this version replaced: one for an edit, several for a merge.
    sources: list[Memory] = field(default_factory=list)
    # One word diff per source, in the same order.
    diffs: list[list[DiffPiece]] = field(default_factory=list)

    @property
    def is_merge(self) -> bool:
        return len(self.sources) > 1

    @property
    def changes(self) -> list[tuple[Memory, list[DiffPiece]]]:
        return list(zip(self.sources, self.diffs, strict=True))


def _versions(chain: list[Memory], current: Memory) -> list[Version]:
    versions = []
    for member in chain:
        sources = [other for other in chain if other.superseded_by_id == member.pk]
        versions.append(
            Version(
                memory=member,
                is_head=member.superseded_by_id is None,
                is_current=member.pk == current.pk,
                sources=sources,
                diffs=[word_diff(source.content, member.content) for source in sources],
            )
        )
    return versions


@login_required
@owner_time_zone
@require_GET
def memory_detail(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    chain = Memory.objects.for_owner(request.user).chain(memory)
    head = next((member for member in chain if member.superseded_by_id is None), memory)
    events = (
        MemoryEvent.objects.filter(owner=request.user, memory__in=[m.pk for m in chain])
        .select_related("actor")
        .order_by("at", "id")
    )
    return render(
        request,
        "memories/memory_detail.html",
        {
            "memory": memory,
            "head": head,
            "versions": _versions(chain, memory),
            "events": events,
            "reason_form": ReasonForm(),
        },
    )


@login_required
@owner_time_zone
@require_http_methods(["GET", "POST"])
def memory_edit(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    if memory.status not in (Memory.Status.ACTIVE, Memory.Status.PROPOSED):
        messages.error(
            request, f"Memory {memory.pk} is {memory.status}: only the current version is edited."
        )
        return redirect("memory-detail", pk=memory.pk)
    if request.method == "GET":
        form = MemoryEditForm.for_memory(memory)
        return render(request, "memories/memory_edit.html", {"memory": memory, "form": form})
    form = MemoryEditForm(request.POST)
    if not form.is_valid():
        return render(request, "memories/memory_edit.html", {"memory": memory, "form": form})
    data = form.cleaned_data
    unchanged = (
        data["content"] == memory.content
        and data["type"] == memory.type
        and data["entities"] == list(memory.entity_refs)
    )
    try:
        if unchanged and memory.status == Memory.Status.ACTIVE:
            messages.info(request, "Nothing changed, so no new version was written.")
            return redirect("memory-detail", pk=memory.pk)
        if unchanged:
            memory.confirm(actor=request.user, via=VIA, reason=data["reason"])
            messages.success(request, f"Confirmed {_quote(memory)} unchanged")
            return redirect("memory-detail", pk=memory.pk)
        was_proposal = memory.status == Memory.Status.PROPOSED
        new = memory.supersede(
            data["content"],
            type=data["type"],
            entities=data["entities"],
            actor=request.user,
            via=VIA,
            reason=data["reason"],
        )
    except IllegalTransition as error:
        messages.error(request, error.message)
        return redirect("memory-detail", pk=memory.pk)
    if was_proposal:
        messages.success(request, f"Confirmed your edited version {_quote(new)}")
    else:
        messages.success(request, f"Saved a new version {_quote(new)}")
    return redirect("memory-detail", pk=new.pk)


@login_required
@owner_time_zone
@require_POST
def reconfirm(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    try:
        memory.reconfirm(actor=request.user, via=VIA)
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Re-confirmed {_quote(memory)}: it counts as fresh again.")
    return redirect("memory-detail", pk=memory.pk)


@login_required
@owner_time_zone
@require_http_methods(["GET", "POST"])
def archive(request: HttpRequest, pk: int) -> HttpResponse:
    """GET (or a POST without ``confirmed``) asks first; the confirmed POST archives."""
    memory = _owned(request, pk)
    form = ReasonForm(request.POST or None)
    if request.method == "GET" or request.POST.get("confirmed") != "yes" or not form.is_valid():
        return render(request, "memories/memory_archive.html", {"memory": memory, "form": form})
    try:
        memory.archive(actor=request.user, via=VIA, reason=form.cleaned_data["reason"])
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Archived {_quote(memory)}: it will no longer be recalled.")
    return redirect("memory-detail", pk=memory.pk)


# --- API tokens ------------------------------------------------------------------


@login_required
@owner_time_zone
@require_GET
def tokens(request: HttpRequest) -> HttpResponse:
    return _tokens_page(request, TokenForm())


def _tokens_page(request: HttpRequest, form: TokenForm, status: int = 200) -> HttpResponse:
    new_token = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    return render(
        request,
        "memories/tokens.html",
        {
            "form": form,
            "tokens": ApiToken.objects.filter(owner=request.user),
            "new_token": new_token,
        },
        status=status,
    )


@login_required
@owner_time_zone
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The token needs a name.")
        return _tokens_page(request, form, status=400)
    token, raw = ApiToken.issue(request.user, form.cleaned_data["name"])
    # Kept in the session only until the next page view shows it, once.
    request.session[NEW_TOKEN_SESSION_KEY] = {"id": token.pk, "name": token.name, "raw": raw}
    messages.success(request, f"Created the token “{token.name}”. Copy it now.")
    return redirect("tokens")


@login_required
@owner_time_zone
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.filter(owner=request.user), pk=pk)
    if token.is_revoked:
        messages.info(request, f"The token “{token.name}” was already revoked.")
    else:
        token.revoke()
        messages.success(request, f"Revoked the token “{token.name}”. It no longer works.")
    return redirect("tokens")


# --- retrieval inspector ---------------------------------------------------------


@login_required
@owner_time_zone
@require_http_methods(["GET", "POST"])
def inspect(request: HttpRequest) -> HttpResponse:
    """What recall would hand the assistant for a message, and why. Never stamps recall.

    A POST, so that private messages stay out of addresses and access logs.
    """
    form = InspectForm(request.POST or None)
    context: dict = {"form": form, "result": None, "error": None, "failed_legs": {}}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        fusion = data["pipeline"] == "fusion"
        try:
            result = recall(
                request.user,
                data["message"],
                pipeline=data["pipeline"],
                token_budget=data["budget"],
                as_of=data["as_of"],
                legs=(data["legs"] or None) if fusion else None,
                explain=True,
                dry_run=True,
            )
        except RecallFailed as failure:
            context.update(error=str(failure), failed_legs=failure.legs)
        except ValueError as error:
            context["error"] = str(error)
        else:
            items = [*result.memories, *result.cut]
            by_id = {item.memory.pk: item.memory for item in items}
            context.update(
                result=result,
                candidates=score_bars(result.pipeline, items),
                legs=[
                    (report, [(pk, by_id.get(pk)) for pk in report.ranked_ids[:LEG_PREVIEW]])
                    for report in result.legs.values()
                ],
                min_score=MIN_SCORE,
            )
    return render(request, "memories/inspect.html", context)
