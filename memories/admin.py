"""The Django admin for staff: look at everything, change state only through the model.

Nothing can be deleted here and no field is edited in place: memories change
through the same model methods as the API and pages (as admin actions), events
are read-only, and a token's secret is never shown, only its prefix.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memories import redaction
from memories.api_tokens import ApiToken
from memories.forms import RedactForm
from memories.models import IllegalTransition, Memory, MemoryEvent, RedactionRefused

# The channel recorded on events of changes made here.
VIA_ADMIN = "admin"


def memory_page_url(memory_id: int) -> str:
    """The owner's page for a memory and its chain."""
    for name in ("memory-detail", "memory_detail"):
        try:
            return reverse(name, args=[memory_id])
        except NoReverseMatch:
            continue
    return f"/memories/{memory_id}/"


def admin_change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


class NoDeleteAdmin(admin.ModelAdmin):
    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class MemoryEventInline(admin.TabularInline):
    model = MemoryEvent
    fk_name = "memory"
    fields = ("at", "action", "actor", "via", "reason", "data")
    readonly_fields = fields
    ordering = ("at", "id")
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Memory)
class MemoryAdmin(NoDeleteAdmin):
    list_display = (
        "id",
        "short_content",
        "type",
        "status",
        "owner",
        "source",
        "confidence",
        "created_at",
        "last_confirmed_at",
        "chain_link",
    )
    list_filter = ("status", "type", "owner", "source")
    search_fields = ("content", "session_id", "owner__username", "=id")
    raw_id_fields = ("owner", "superseded_by")
    list_select_related = ("owner",)
    date_hierarchy = "created_at"
    fields = (
        "owner",
        "type",
        "status",
        "content",
        "entity_refs",
        "confidence",
        "source",
        "session_id",
        "metadata",
        "has_embedding",
        "created_at",
        "last_confirmed_at",
        "last_retrieved_at",
        "superseded_by",
        "chain_versions",
        "chain_link",
    )
    readonly_fields = fields
    inlines = (MemoryEventInline,)
    actions = (
        "confirm_memories",
        "reject_memories",
        "reconfirm_memories",
        "archive_memories",
        "redact_memories",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The vector and the search document are large; the admin shows only a flag.
        return (
            super()
            .get_queryset(request)
            .defer("embedding", "tsv")
            .annotate(
                embedded=ExpressionWrapper(Q(embedding__isnull=False), output_field=BooleanField())
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Supersede-only: no field is ever edited in place.
        return False

    def has_transition_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("memories.change_memory")

    @admin.display(description="content")
    def short_content(self, memory: Memory) -> str:
        return Truncator(memory.content).chars(80)

    @admin.display(description="embedding", boolean=True)
    def has_embedding(self, memory: Memory) -> bool:
        return memory.embedded

    @admin.display(description="chain")
    def chain_link(self, memory: Memory) -> str:
        return format_html('<a href="{}">chain</a>', memory_page_url(memory.pk))

    @admin.display(description="versions, oldest first")
    def chain_versions(self, memory: Memory) -> str:
        rows = [
            (
                admin_change_url(version),
                version.pk,
                version.status,
                Truncator(version.content).chars(80),
                " (this one)" if version.pk == memory.pk else "",
            )
            for version in Memory.objects.for_owner(memory.owner_id).chain(memory)
        ]
        return format_html(
            "<ol>{}</ol>",
            format_html_join("", '<li><a href="{}">#{}</a> [{}] {}{}</li>', rows),
        )

    def _transition(self, request: HttpRequest, queryset: QuerySet, method: str) -> None:
        done, refused = 0, []
        for memory in queryset.order_by("id"):
            try:
                getattr(memory, method)(actor=request.user, via=VIA_ADMIN)
                done += 1
            except IllegalTransition as error:
                refused.append(str(error))
        if done:
            self.message_user(request, f"{method.capitalize()}: {done} memories.")
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)

    @admin.action(description="Confirm selected proposals", permissions=["transition"])
    def confirm_memories(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._transition(request, queryset, "confirm")

    @admin.action(description="Reject selected proposals", permissions=["transition"])
    def reject_memories(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._transition(request, queryset, "reject")

    @admin.action(description="Re-confirm selected active memories", permissions=["transition"])
    def reconfirm_memories(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._transition(request, queryset, "reconfirm")

    @admin.action(description="Archive selected active memories", permissions=["transition"])
    def archive_memories(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._transition(request, queryset, "archive")

    @admin.action(
        description="Redact selected memories (erase their text)…", permissions=["transition"]
    )
    def redact_memories(self, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
        """An intermediate page says what will be erased and asks for a reason first."""
        memories = list(queryset.select_related("owner").order_by("id"))
        confirmed = request.POST.get("redact_confirmed") == "yes"
        form = RedactForm(request.POST if confirmed else None)
        if confirmed and form.is_valid():
            self._redact(request, memories, form.cleaned_data)
            return None
        for memory in memories:
            memory.chain_size = len(Memory.objects.chain(memory))
        return TemplateResponse(
            request,
            "admin/memories/memory/redact_confirmation.html",
            {
                **self.admin_site.each_context(request),
                "title": "Redact these memories?",
                "opts": self.model._meta,
                "memories": memories,
                "form": form,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            },
        )

    def _redact(self, request: HttpRequest, memories: list[Memory], data: dict) -> None:
        erased, refused = 0, []
        for memory in memories:
            try:
                result = redaction.redact(
                    memory,
                    chain=data["scope"] == "chain",
                    actor=request.user,
                    via=VIA_ADMIN,
                    reason=data["reason"],
                )
            except (IllegalTransition, RedactionRefused) as error:
                refused.append(error.message)
            else:
                erased += len(result.memory_ids)
        if erased:
            self.message_user(request, f"Redacted {erased} memory versions: their text is erased.")
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)


@admin.register(MemoryEvent)
class MemoryEventAdmin(NoDeleteAdmin):
    list_display = ("at", "action", "memory_link", "owner", "actor", "via", "reason")
    list_filter = ("action", "via", "owner")
    search_fields = ("reason", "memory__content", "owner__username", "=memory__id")
    raw_id_fields = ("memory", "owner", "actor")
    list_select_related = ("memory", "owner", "actor")
    date_hierarchy = "at"
    fields = ("at", "action", "memory", "owner", "actor", "via", "reason", "data")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="memory")
    def memory_link(self, event: MemoryEvent) -> str:
        return format_html(
            '<a href="{}">#{}</a> {}',
            admin_change_url(event.memory),
            event.memory_id,
            Truncator(event.memory.content).chars(50),
        )


@admin.register(ApiToken)
class ApiTokenAdmin(NoDeleteAdmin):
    list_display = ("masked", "name", "owner", "created_at", "last_used_at", "revoked_at")
    list_filter = ("owner", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("name", "prefix", "owner__username")
    raw_id_fields = ("owner",)
    list_select_related = ("owner",)
    # Never the digest: the prefix is all anyone needs to tell tokens apart.
    fields = ("masked", "name", "owner", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ("revoke_tokens",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A new secret is shown once, by `createtoken` or the tokens page.
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("memories.change_apitoken")

    @admin.display(description="token", ordering="prefix")
    def masked(self, token: ApiToken) -> str:
        return f"{token.prefix}…"

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet) -> None:
        live = list(queryset.live())
        for token in live:
            token.revoke()
        self.message_user(request, f"Revoked {len(live)} tokens.")
