"""Template helpers of the owner's pages: times, counts, score bars, memory text."""

from __future__ import annotations

import unicodedata
from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince, timeuntil

from memories.models import Memory
from retrieval.render import invisible_positions

register = template.Library()

JUST_NOW = timedelta(seconds=45)


@register.filter
def relative(value: datetime | None, now: datetime | None = None) -> str:
    """'3 days ago', 'in 2 hours', 'just now'."""
    if value is None:
        return ""
    now = now or timezone.now()
    if abs(now - value) < JUST_NOW:
        return "just now"
    if value <= now:
        return f"{timesince(value, now, depth=1)} ago"
    return f"in {timeuntil(value, now, depth=1)}"


@register.simple_tag
def when(value: datetime | None, empty: str = "never") -> str:
    """A timestamp in the owner's time zone, with a relative hint beside it."""
    if value is None:
        return format_html('<span class="muted">{}</span>', empty)
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time> <span class="relative">({})</span>',
        value.isoformat(),
        local.strftime("%A %-d %B %Y, %H:%M:%S %Z"),
        local.strftime("%-d %b %Y, %H:%M %Z"),
        relative(value),
    )


@register.simple_tag
def queue_count(user) -> int:
    if not getattr(user, "is_authenticated", False):
        return 0
    return Memory.objects.for_owner(user).pending().count()


@register.filter
def percent_of(value: float, whole: float) -> float:
    """``value`` as a percentage of ``whole``, clamped to 0..100, for bar widths."""
    if not whole:
        return 0.0
    return round(max(0.0, min(100.0, 100.0 * float(value) / float(whole))), 1)


@register.filter
def get_item(mapping: dict, key):
    return mapping.get(key) if mapping else None


def _invisible_mark(char: str) -> str:
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    if not name:
        name = "CONTROL CHARACTER" if unicodedata.category(char) == "Cc" else "UNASSIGNED"
    return format_html('<span class="invisible-char" title="{} {}">⟨{}⟩</span>', code, name, code)


@register.filter(needs_autoescape=True)
def show_invisible(text, autoescape: bool = True) -> str:
    """Memory text for a page with each character the block drops (it draws nothing)
    shown as a marked ⟨U+…⟩, so the owner sees everything that was stored."""
    text = "" if text is None else str(text)
    escape = conditional_escape if autoescape else str
    pieces, start = [], 0
    for index in invisible_positions(text):
        pieces += [escape(text[start:index]), _invisible_mark(text[index])]
        start = index + 1
    if not pieces:
        return escape(text)
    pieces.append(escape(text[start:]))
    return mark_safe("".join(pieces))
