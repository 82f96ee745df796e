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
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.text import Truncator
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memories import redaction
from memories.access_log import deliveries_of
from memories.api_tokens import SCOPE_HELP, ApiToken
from memories.diff import DiffPiece, word_diff
from memories.disk_erase import DiskErase, erase_for, request_erase
from memories.forms import (
    BulkActionForm,
    InspectForm,
    MemoryAddForm,
    MemoryEditForm,
    MemoryFilterForm,
    MemoryIdsForm,
    ReasonForm,
    RedactForm,
    TokenForm,
)
from memories.inspector import block_cost, explain, legend
from memories.models import (
    MAX_REASON_CHARS,
    IllegalTransition,
    InvalidMemory,
    Memory,
    MemoryEvent,
    RedactionRefused,
)
from memories.provenance import provenance
from memories.related import DUPLICATE, QUERY_FAILED, SEE_ALSO, related_for_memories
from retrieval.recall import recall
from retrieval.results import RecallFailed

VIA = "page"
PAGE_SIZE = 25
# Each proposal on a page is compared with the owner's memories (one statement
# for the page, docs/review.md "Time"): 20 keep the page quick.
QUEUE_PAGE_SIZE = 20
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


def _add_rule_error(form, error: InvalidMemory) -> None:
    """A memory rule the form's own checks did not catch, shown next to its field."""
    form.add_error(error.field if error.field in form.fields else None, error.message)


def _owned(request: HttpRequest, pk: int) -> Memory:
    return get_object_or_404(Memory.objects.for_owner(request.user), pk=pk)


def _quote(memory: Memory) -> str:
    return f"“{Truncator(memory.content).chars(60)}”"


def _safe_next(request: HttpRequest, target: str | None = None) -> str:
    """``target`` (by default the form's ``next``) if it is an address on this site, else ''."""
    if target is None:
        target = request.POST.get("next", "") or request.GET.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


def _back(request: HttpRequest, default: str, **kwargs) -> HttpResponse:
    """Redirect to the page the form came from, if it is one of ours."""
    target = _safe_next(request)
    if target:
        return redirect(target)
    return redirect(default, **kwargs)


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
            "add_form": MemoryAddForm(),
        },
    )


# --- confirmation queue ----------------------------------------------------------

# Session key holding the ids of the memories just rejected, so the next queue
# page offers to undo it.
UNDO_SESSION_KEY = "timothy_queue_undo"
# Rejected memories the queue page offers to restore.
RECENTLY_REJECTED = 5


@dataclass
class RelatedView:
    memory: Memory
    relation: str
    score: float
    # The words that turn the related memory into the proposal.
    diff: list[DiffPiece]
    # Why a "see also" is not a version of it ("about your brother, not you").
    why: str = ""

    @property
    def is_duplicate(self) -> bool:
        return self.relation == DUPLICATE


@dataclass
class QueueItem:
    memory: Memory
    # Active memories it repeats or updates: each with its actions.
    related: list[RelatedView]
    degraded: str
    # Close memories about another subject, aspect, occasion or object: no action.
    see_also: list[RelatedView] = field(default_factory=list)
    # Other proposals of the same fact, settled with this one's decision.
    copies: list[Memory] = field(default_factory=list)

    @property
    def about(self):
        return self.memory.about


def _queue_items(owner, proposals: list[Memory]) -> list[QueueItem]:
    results = related_for_memories(owner, proposals, include_proposals=True)
    items = []
    shown_as_copy: set[int] = set()
    for memory in proposals:
        if memory.pk in shown_as_copy:
            continue
        result = results.get(memory.pk)
        views = [
            (
                item,
                RelatedView(
                    item.memory,
                    item.relation,
                    item.score,
                    word_diff(item.memory.content, memory.content),
                    why=item.signals.why,
                ),
            )
            for item in (result.related if result else [])
        ]
        copies = [
            item.memory
            for item, _ in views
            if item.memory.status == Memory.Status.PROPOSED and item.relation == DUPLICATE
        ]
        shown_as_copy.update(copy.pk for copy in copies)
        items.append(
            QueueItem(
                memory,
                [
                    view
                    for item, view in views
                    if item.relation != SEE_ALSO and item.memory.status == Memory.Status.ACTIVE
                ],
                result.degraded if result else "",
                see_also=[
                    view
                    for item, view in views
                    if item.relation == SEE_ALSO and item.memory.status == Memory.Status.ACTIVE
                ],
                copies=copies,
            )
        )
    return items


def _replaceable(owner, proposal: Memory) -> list[Memory]:
    """The active memories a proposal repeats or updates: what it may replace."""
    result = related_for_memories(owner, [proposal]).get(proposal.pk)
    return [item.memory for item in (result.related if result else []) if item.relation != SEE_ALSO]


def _settle_copies(request: HttpRequest, memory: Memory, field: str = "copies") -> list[Memory]:
    """Reject the proposals the form names as copies of ``memory`` (``field``:
    ``copies`` on a card's own forms, ``copies-of-N`` on the bulk form)."""
    ids = [int(raw) for raw in request.POST.getlist(field) if raw.isdigit()]
    return memory.settle_copies(ids, actor=request.user, via=VIA)


def _named_copies(request: HttpRequest, memory: Memory) -> list[Memory]:
    """The owner's other proposals named by the request's ``copies`` values."""
    raw = request.GET.getlist("copies") + request.POST.getlist("copies")
    ids = [int(value) for value in raw if value.isdigit()]
    return list(
        Memory.objects.for_owner(request.user)
        .pending()
        .filter(pk__in=ids)
        .exclude(pk=memory.pk)
        .order_by("pk")
    )


def _back_to_queue(request: HttpRequest, memory: Memory) -> HttpResponse:
    """Back to the page the form came from; on the queue, at the proposal that
    followed the one just settled (its ``#proposal-N``), where the owner was
    looking, rather than at the top of the page."""
    target = _safe_next(request) or reverse("queue")
    if target.split("?", 1)[0].split("#", 1)[0] == reverse("queue"):
        following = (
            Memory.objects.for_owner(request.user)
            .pending()
            .filter(
                Q(created_at__gt=memory.created_at)
                | Q(created_at=memory.created_at, pk__gt=memory.pk)
            )
            .values_list("pk", flat=True)
            .first()
        )
        if following is None:
            pending = Memory.objects.for_owner(request.user).pending()
            following = pending.values_list("pk", flat=True).last()
        if following is not None:
            target = f"{target.split('#', 1)[0]}#proposal-{following}"
    return redirect(target)


def _remember_undo(request: HttpRequest, memories: list[Memory]) -> None:
    request.session[UNDO_SESSION_KEY] = [memory.pk for memory in memories]


@login_required
@owner_time_zone
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    pending = Memory.objects.for_owner(request.user).pending()
    page = Paginator(pending, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    undo_ids = request.session.pop(UNDO_SESSION_KEY, [])
    undo = list(
        Memory.objects.for_owner(request.user).filter(
            pk__in=undo_ids, status=Memory.Status.REJECTED
        )
    )
    rejected_events = (
        MemoryEvent.objects.filter(
            owner=request.user,
            action=MemoryEvent.Action.REJECTED,
            memory__status=Memory.Status.REJECTED,
        )
        .select_related("memory")
        .order_by("-at", "-id")
    )
    recently_rejected: list[Memory] = []
    for event in rejected_events[: RECENTLY_REJECTED * 3]:
        if event.memory not in recently_rejected:
            recently_rejected.append(event.memory)
    return render(
        request,
        "memories/queue.html",
        {
            "page": page,
            "proposals": page.object_list,
            "items": _queue_items(request.user, list(page.object_list)),
            "reason_form": ReasonForm(),
            "undo": undo,
            "recently_rejected": recently_rejected[:RECENTLY_REJECTED],
            "query_failed": QUERY_FAILED,
        },
    )


def _replaced(request: HttpRequest) -> Memory | None:
    """The memory named by a ``replaces`` / ``duplicate_of`` field: the owner's, else 404."""
    raw = request.POST.get("replaces") or request.POST.get("duplicate_of") or ""
    if not raw:
        return None
    if not raw.isdigit():
        get_object_or_404(Memory.objects.none())
    return _owned(request, int(raw))


@login_required
@owner_time_zone
@require_POST
def confirm(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    replaces = _replaced(request)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        memory.confirm(actor=request.user, via=VIA, reason=reason, replaces=replaces, by_owner=True)
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        settled = _settle_copies(request, memory)
        if settled:
            # The copies were rejected: the queue offers to undo that.
            _remember_undo(request, settled)
        also = f" and rejected {_count(settled, 'copy', 'copies')} of it" if settled else ""
        if replaces is None:
            messages.success(request, f"Confirmed {_quote(memory)}{also}")
        else:
            messages.success(
                request,
                f"Confirmed {_quote(memory)} as the new version of #{replaces.pk}{also}",
            )
    return _back_to_queue(request, memory)


def _count(items: list, one: str, many: str) -> str:
    return f"{len(items)} {one if len(items) == 1 else many}"


@login_required
@owner_time_zone
@require_POST
def reject(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    duplicate_of = _replaced(request)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The reason is too long ({MAX_REASON_CHARS} characters at most).")
        return _back(request, "queue")
    reason = form.cleaned_data["reason"]
    if duplicate_of is not None:
        reason = f"Duplicate of memory {duplicate_of.pk} {_quote(duplicate_of)}" + (
            f": {reason}" if reason else ""
        )
        # The note on the duplicate must not push a reason of full length over the limit.
        reason = Truncator(reason).chars(MAX_REASON_CHARS)
    try:
        memory.reject(actor=request.user, via=VIA, reason=reason)
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        settled = _settle_copies(request, memory)
        _remember_undo(request, [memory, *settled])
        if duplicate_of is None:
            messages.success(request, f"Rejected {_quote(memory)}")
        else:
            messages.success(
                request, f"Rejected {_quote(memory)} as a duplicate of #{duplicate_of.pk}"
            )
    return _back_to_queue(request, memory)


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
    if action == "reject" and request.POST.get("confirmed") != "yes":
        # Rejecting several at once asks first (the page script asks in a dialog).
        return render(
            request,
            "memories/queue_bulk_reject.html",
            {"memories": memories, "reason": reason, "reason_form": ReasonForm()},
        )
    done, failures, settled = [], [], []
    for memory in memories:
        if memory in settled:
            # Selected, but already rejected as a copy of another selected proposal.
            continue
        try:
            if action == "confirm":
                memory.confirm(actor=request.user, via=VIA, reason=reason, by_owner=True)
            else:
                memory.reject(actor=request.user, via=VIA, reason=reason)
        except IllegalTransition as error:
            failures.append(error.message)
        else:
            done.append(memory)
            settled += _settle_copies(request, memory, f"copies-of-{memory.pk}")
    past = "Confirmed" if action == "confirm" else "Rejected"
    if done:
        count = len(done)
        also = f" and rejected {_count(settled, 'copy', 'copies')} of them" if settled else ""
        messages.success(request, f"{past} {count} {'memory' if count == 1 else 'memories'}{also}.")
        if action == "reject" or settled:
            _remember_undo(request, (done if action == "reject" else []) + settled)
    for failure in failures:
        messages.error(request, failure)
    return redirect("queue")


@login_required
@owner_time_zone
@require_POST
def restore(request: HttpRequest) -> HttpResponse:
    """Put rejected memories back in the queue (undo, or a later change of mind)."""
    form = MemoryIdsForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return _back(request, "queue")
    ids = set(form.cleaned_data["ids"])
    memories = list(Memory.objects.for_owner(request.user).filter(pk__in=ids).order_by("pk"))
    if len(memories) != len(ids):
        get_object_or_404(Memory.objects.none())
    restored = []
    for memory in memories:
        try:
            memory.restore(actor=request.user, via=VIA, reason=form.cleaned_data["reason"])
        except IllegalTransition as error:
            messages.error(request, error.message)
        else:
            restored.append(memory)
    if len(restored) == 1:
        messages.success(request, f"Restored {_quote(restored[0])} to the queue.")
    elif restored:
        messages.success(request, f"Restored {len(restored)} memories to the queue.")
    return _back(request, "queue")


# --- memory browser ----------------------------------------------------------------


def _filtered(owner, form: MemoryFilterForm, *, by_status: bool = True):
    memories = Memory.objects.for_owner(owner)
    data = form.cleaned_data
    if data["q"]:
        memories = memories.matching(data["q"])
    for name in ("status", "type", "source") if by_status else ("type", "source"):
        if data[name]:
            memories = memories.filter(**{name: data[name]})
    if data["entity"]:
        memories = memories.naming(data["entity"])
    if data["created_from"]:
        memories = memories.filter(created_at__date__gte=data["created_from"])
    if data["created_to"]:
        memories = memories.filter(created_at__date__lte=data["created_to"])
    return memories.order_by(*form.ordering())


STATUS_ALL = "all"
# The list's tabs, in the order an owner looks for them.
_STATUS_TABS = [
    (status, Memory.Status(status).label)
    for status in ("active", "proposed", "archived", "superseded", "rejected", "redacted")
]


@login_required
@owner_time_zone
@require_GET
def memory_list(request: HttpRequest) -> HttpResponse:
    # One tab per status; without one the list shows the active memories, and
    # the tab "All" (status=all) every memory in every state.
    data = request.GET.copy()
    tab = data.get("status") or Memory.Status.ACTIVE
    data["status"] = "" if tab == STATUS_ALL else tab
    form = MemoryFilterForm(data)
    filtering = any(
        value for key, value in request.GET.items() if key not in ("page", "sort", "status")
    )
    # Filters that do not validate are not applied, and the page says so rather
    # than counting every memory as a match.
    invalid = not form.is_valid()
    if not invalid:
        memories = _filtered(request.user, form)
        counted = _filtered(request.user, form, by_status=False)
    else:
        memories = Memory.objects.for_owner(request.user).order_by("-created_at", "-id")
        counted = Memory.objects.for_owner(request.user)
    counts = {
        row["status"]: row["n"]
        for row in counted.order_by().values("status").annotate(n=Count("id"))
    }
    others = {key: value for key, value in request.GET.items() if key not in ("page", "status")}
    tabs = [
        {
            "status": status,
            "label": label,
            "count": counts.get(status, 0),
            "query": urlencode({**others, "status": status}),
            "current": status == tab,
        }
        for status, label in [*_STATUS_TABS, (STATUS_ALL, "All")]
    ]
    tabs[-1]["count"] = sum(counts.values())
    page = Paginator(memories, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "memories/memory_list.html",
        {
            "form": form,
            "page": page,
            "memories": page.object_list,
            "filtering": filtering and not invalid,
            "invalid": invalid,
            "search": form.cleaned_data.get("q", "") if not invalid else "",
            "add_form": MemoryAddForm(),
            "tabs": tabs,
            "tab": tab,
            "tab_label": next((t["label"] for t in tabs if t["current"]), ""),
            "total": tabs[-1]["count"],
        },
    )


@login_required
@owner_time_zone
@require_http_methods(["GET", "POST"])
def memory_add(request: HttpRequest) -> HttpResponse:
    """The owner writes a memory: active at once, as the API's mode remember.

    The small forms on the home and memories pages post here; errors are shown
    on this page's own form, with what was typed.
    """
    form = MemoryAddForm(request.POST or None)
    if request.method == "GET" or not form.is_valid():
        status = 400 if request.method == "POST" else 200
        return render(
            request,
            "memories/memory_add.html",
            {"form": form, "next": _safe_next(request)},
            status=status,
        )
    data = form.cleaned_data
    try:
        memory = Memory.remember(
            request.user,
            data["content"],
            data["type"],
            entities=data["entities"],
            actor=request.user,
            via=VIA,
        )
    except InvalidMemory as error:
        _add_rule_error(form, error)
        return render(
            request,
            "memories/memory_add.html",
            {"form": form, "next": _safe_next(request)},
            status=400,
        )
    messages.success(request, f"Remembered {_quote(memory)} (#{memory.pk}). It is active now.")
    return _back(request, "memory-list")


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
    # The event that erased this version's text, if it was redacted.
    redaction: MemoryEvent | None = None

    @property
    def is_redacted(self) -> bool:
        return self.memory.status == Memory.Status.REDACTED

    @property
    def is_merge(self) -> bool:
        # A proposal confirmed, edited, as the new version of another memory
        # replaces two rows too, but is no merge.
        return len(self.sources) > 1 and "merged_from" in (self.memory.metadata or {})

    @property
    def changes(self) -> list[tuple[Memory, list[DiffPiece]]]:
        return list(zip(self.sources, self.diffs, strict=True))


def _versions(
    chain: list[Memory], current: Memory, redactions: dict[int, MemoryEvent]
) -> list[Version]:
    versions = []
    for member in chain:
        sources = [other for other in chain if other.superseded_by_id == member.pk]
        versions.append(
            Version(
                memory=member,
                is_head=member.superseded_by_id is None,
                is_current=member.pk == current.pk,
                sources=sources,
                # A redacted side has no words to compare.
                diffs=[
                    []
                    if Memory.Status.REDACTED in (source.status, member.status)
                    else word_diff(source.content, member.content)
                    for source in sources
                ],
                redaction=redactions.get(member.pk),
            )
        )
    return versions


def _redactions(events: list[MemoryEvent]) -> dict[int, MemoryEvent]:
    return {e.memory_id: e for e in events if e.action == MemoryEvent.Action.REDACTED}


@login_required
@owner_time_zone
@require_GET
def memory_detail(request: HttpRequest, pk: int) -> HttpResponse:
    memory = _owned(request, pk)
    chain = Memory.objects.for_owner(request.user).chain(memory)
    head = next((member for member in chain if member.superseded_by_id is None), memory)
    events = list(
        MemoryEvent.objects.filter(owner=request.user, memory__in=[m.pk for m in chain])
        .select_related("actor")
        .order_by("at", "id")
    )
    creation = next((event for event in events if event.memory_id == memory.pk), None)
    redactions = _redactions(events)
    return render(
        request,
        "memories/memory_detail.html",
        {
            "memory": memory,
            "provenance": provenance(memory, creation, request.user),
            "head": head,
            "versions": _versions(chain, memory, redactions),
            "redaction": redactions.get(memory.pk),
            # What of its old bytes is erased from the database's files (memories/disk_erase.py).
            "disk_erase": erase_for(memory) if memory.status == Memory.Status.REDACTED else None,
            "chain_has_text": any(m.status != Memory.Status.REDACTED for m in chain),
            "events": events,
            "reason_form": ReasonForm(),
            # Which tokens received it, how often, last when (memories/access_log.py).
            "deliveries": deliveries_of(request.user, memory.pk),
            "access_log_days": settings.ACCESS_LOG_DAYS,
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
    back = _safe_next(request, request.GET.get("next") or request.POST.get("next", ""))
    context = {"memory": memory, "next": back}
    was_proposal = memory.status == Memory.Status.PROPOSED
    replaceable = _replaceable(request.user, memory) if was_proposal else []
    # Copies of the proposal in the queue (its links name them): confirming the
    # edit rejects them as duplicates of it, as the queue's own buttons do.
    context["copies"] = _named_copies(request, memory) if was_proposal else []
    if request.method == "GET":
        wanted = request.GET.get("replaces", "")
        form = MemoryEditForm.for_memory(
            memory,
            replaceable,
            replaces=int(wanted)
            if wanted.isdigit() and int(wanted) in {m.pk for m in replaceable}
            else None,
        )
        return render(request, "memories/memory_edit.html", context | {"form": form})
    form = MemoryEditForm(request.POST, replaceable=replaceable)
    if not form.is_valid():
        return render(request, "memories/memory_edit.html", context | {"form": form})
    data = form.cleaned_data
    about = form.about_given(memory)
    replaces = (
        next((m for m in replaceable if m.pk == data["replaces"]), None)
        if data.get("replaces")
        else None
    )
    # The one edit path (Memory.edit), the API's supersede's too: nothing new for
    # an edit that changes nothing; what the owner writes or confirms here
    # carries the owner's confidence and source (by_owner).
    try:
        new = memory.edit(
            data["content"],
            type=data["type"],
            entities=data["entities"],
            about=about,
            replaces=replaces,
            by_owner=True,
            actor=request.user,
            via=VIA,
            reason=data["reason"],
        )
    except IllegalTransition as error:
        messages.error(request, error.message)
        return redirect("memory-detail", pk=memory.pk)
    except InvalidMemory as error:
        _add_rule_error(form, error)
        return render(request, "memories/memory_edit.html", context | {"form": form})
    settled = _settle_copies(request, new) if was_proposal else []
    if settled:
        _remember_undo(request, settled)
        messages.info(request, f"Also rejected {_count(settled, 'copy', 'copies')} of it.")
    if new.pk == memory.pk and was_proposal:
        if replaces is not None:
            messages.success(
                request, f"Confirmed {_quote(memory)} as the new version of #{replaces.pk}"
            )
        else:
            messages.success(request, f"Confirmed {_quote(memory)} unchanged")
        return _back(request, "memory-detail", pk=memory.pk)
    if new.pk == memory.pk:
        messages.info(request, "Nothing changed, so no new version was written.")
        return redirect("memory-detail", pk=memory.pk)
    if was_proposal and replaces is not None:
        messages.success(
            request,
            f"Confirmed your edited version {_quote(new)} as the new version of #{replaces.pk}",
        )
        return _back(request, "memory-detail", pk=new.pk)
    if was_proposal:
        messages.success(request, f"Confirmed your edited version {_quote(new)}")
        # Back to the queue it came from, where the next proposal now waits.
        return _back(request, "memory-detail", pk=new.pk)
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
        # The message carries an Undo button (templates/base.html: "unarchive").
        messages.success(
            request,
            f"Archived {_quote(memory)}: it will no longer be recalled",
            extra_tags="unarchive",
        )
    return redirect("memory-detail", pk=memory.pk)


@login_required
@owner_time_zone
@require_POST
def unarchive(request: HttpRequest, pk: int) -> HttpResponse:
    """Undo an archive: the memory is active (and recalled) again."""
    memory = _owned(request, pk)
    try:
        memory.unarchive(actor=request.user, via=VIA, reason="Undo of the archive")
    except IllegalTransition as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{_quote(memory)} is active again")
    return redirect("memory-detail", pk=memory.pk)


# At most this many other memories holding a redacted text are offered.
SAME_TEXT_LIMIT = 50


def _same_text(owner, memory: Memory, *, exclude: list[int]) -> list[Memory]:
    """The owner's other memories (any status but redacted, rejected included,
    outside this memory's chain) whose text is this one's or contains it."""
    text = memory.content.strip()
    if memory.status == Memory.Status.REDACTED or not text:
        return []
    return list(
        Memory.objects.for_owner(owner)
        .exclude(status=Memory.Status.REDACTED)
        .exclude(pk__in=exclude)
        .filter(content__icontains=text)
        .order_by("-created_at", "-id")[:SAME_TEXT_LIMIT]
    )


@login_required
@owner_time_zone
@require_http_methods(["GET", "POST"])
def redact(request: HttpRequest, pk: int) -> HttpResponse:
    """GET (or a POST without ``confirmed``) shows exactly what will be erased; the
    confirmed POST erases it."""
    memory = _owned(request, pk)
    form = RedactForm(request.POST or None)
    confirmed = request.method == "POST" and request.POST.get("confirmed") == "yes"
    chain = Memory.objects.for_owner(request.user).chain(memory)
    copies = _same_text(request.user, memory, exclude=[m.pk for m in chain])
    text = memory.content.strip().casefold()
    if confirmed and form.is_valid():
        wanted = {int(raw) for raw in request.POST.getlist("also") if raw.isdigit()}
        try:
            result = redaction.redact(
                memory,
                chain=form.cleaned_data["scope"] == "chain",
                actor=request.user,
                via=VIA,
                reason=form.cleaned_data["reason"],
            )
        except IllegalTransition as error:
            messages.error(request, error.message)
            return redirect("memory-detail", pk=memory.pk)
        except RedactionRefused as refused:
            form.add_error("reason", refused.message)
        else:
            also = []
            for copy in copies:
                if copy.pk not in wanted:
                    continue
                try:
                    redaction.redact(
                        copy, actor=request.user, via=VIA, reason=form.cleaned_data["reason"]
                    )
                except (IllegalTransition, RedactionRefused) as error:
                    messages.error(request, f"#{copy.pk}: {error.message}")
                else:
                    also.append(copy.pk)
            count = len(result.memory_ids)
            erased = f"{count} versions" if count > 1 else f"memory #{memory.pk}"
            if also:
                erased += " and " + ", ".join(f"#{pk}" for pk in also)
            messages.success(request, f"Redacted {erased}: the text is erased for good.")
            if request.POST.get("erase_from_disk") == "yes":
                request_erase(owner=request.user, via=VIA)
            return redirect("memory-detail", pk=memory.pk)
    others = [m for m in chain if m.pk != memory.pk and m.status != Memory.Status.REDACTED]
    events = MemoryEvent.objects.filter(owner=request.user, memory__in=[m.pk for m in chain])
    reasons = {
        row["memory_id"]: row["n"]
        for row in events.exclude(reason="").values("memory_id").annotate(n=Count("id")).order_by()
    }
    status = 400 if request.method == "POST" and confirmed else 200
    return render(
        request,
        "memories/memory_redact.html",
        {
            "memory": memory,
            "form": form,
            "others": others,
            "repeated": [m for m in others if m.content.strip() == memory.content.strip()],
            "reasons_here": reasons.get(memory.pk, 0),
            "reasons_in_chain": sum(reasons.get(m.pk, 0) for m in [memory, *others]),
            "redaction": _redactions(list(events.filter(memory=memory))).get(memory.pk),
            "copies": copies,
            "from_extraction": memory.source == Memory.Source.EXTRACTION
            or memory.events.filter(
                action=MemoryEvent.Action.CONFIRMED,
                data__proposed_source=Memory.Source.EXTRACTION,
            ).exists(),
            # Ticked at first: the ones that say exactly the same thing (ignoring
            # case); one that only contains the text is the owner's to tick.
            "copies_checked": {int(raw) for raw in request.POST.getlist("also") if raw.isdigit()}
            if request.method == "POST"
            else {m.pk for m in copies if m.content.strip().casefold() == text},
        },
        status=status,
    )


@login_required
@require_POST
def erase_from_disk(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask for an erase from disk of what a redacted memory left in the database's
    files (memories/disk_erase.py); its page shows how far it got."""
    memory = _owned(request, pk)
    if memory.status != Memory.Status.REDACTED:
        messages.error(request, "Only a redacted memory is erased from disk: redact it first.")
    else:
        erase = erase_for(memory)
        if erase is None or erase.state == DiskErase.State.FAILED:
            request_erase(owner=request.user, via=VIA)
    return redirect("memory-detail", pk=memory.pk)


# --- API tokens ------------------------------------------------------------------


# The tokens page shows a new token's secret once: no cache may keep a copy.
@never_cache
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
            "scope_help": SCOPE_HELP,
        },
        status=status,
    )


@never_cache
@login_required
@owner_time_zone
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        if "scopes" in form.errors:
            messages.error(request, "Pick at least one scope: read, propose or write.")
        else:
            messages.error(request, "The token needs a name.")
        return _tokens_page(request, form, status=400)
    token, raw = ApiToken.issue(
        request.user, form.cleaned_data["name"], scopes=form.cleaned_data["scopes"]
    )
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


@login_required
@owner_time_zone
@require_POST
def token_pause(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.live().filter(owner=request.user), pk=pk)
    token.pause()
    messages.success(
        request,
        f"Paused the token “{token.name}”: it is refused until you resume it.",
    )
    return redirect("tokens")


@login_required
@owner_time_zone
@require_POST
def token_resume(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.live().filter(owner=request.user), pk=pk)
    token.resume()
    messages.success(request, f"Resumed the token “{token.name}”: it works again.")
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
                candidates=explain(result),
                legend=legend(result.pipeline, result.profile),
                cost=block_cost(result),
                legs=[
                    (report, [(pk, by_id.get(pk)) for pk in report.ranked_ids[:LEG_PREVIEW]])
                    for report in result.legs.values()
                ],
            )
    return render(request, "memories/inspect.html", context)
