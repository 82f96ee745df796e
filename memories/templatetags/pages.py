"""Template helpers of the owner's pages: times, counts, names, titles, highlights."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil

from memories import provenance, vocabulary
from memories.matching import highlight_spans
from memories.models import Memory

register = template.Library()

JUST_NOW = timedelta(seconds=45)
# A memory longer than this is titled by its first line or sentence.
TITLE_MAX_CHARS = 120
_SENTENCE_END = re.compile(r"[.!?。！？؟](?=\s)")


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
        '<span class="when"><time datetime="{}" title="{}">{}</time> '
        '<span class="relative">({})</span></span>',
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


@register.filter
def type_name(memory_type: str) -> str:
    return vocabulary.type_name(memory_type)


@register.filter
def via_label(via: str) -> str:
    return vocabulary.VIA_LABELS.get(via, via)


@register.filter
def source_label(source: str) -> str:
    return vocabulary.SOURCE_SHORT_LABELS.get(source, source)


@register.filter
def recorded_token(metadata: dict | None) -> dict | None:
    """The API token a memory was created with ({"id", "name", "prefix"}), if recorded."""
    return provenance.recorded_token(metadata)


@register.filter
def short_title(content: str) -> str:
    """A memory's first line, or first sentence, cut to TITLE_MAX_CHARS at a word."""
    text = content.strip()
    line = text.splitlines()[0].strip() if text else ""
    if len(line) <= TITLE_MAX_CHARS:
        return line
    sentence = _SENTENCE_END.search(line, 0, TITLE_MAX_CHARS)
    if sentence:
        return line[: sentence.end()]
    return Truncator(line).words(len(line[:TITLE_MAX_CHARS].split()) - 1, truncate="…")


@register.filter
def is_titled(content: str) -> bool:
    """Whether ``short_title`` leaves something out."""
    return short_title(content) != content.strip()


@register.filter
def highlight(text: str, search: str) -> SafeString:
    """``text`` escaped, with what ``search`` matched (ignoring case and accents) in <mark>."""
    text = str(text)
    spans = highlight_spans(text, search or "")
    if not spans:
        return escape(text)
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(escape(text[position:start]))
        pieces.append(f"<mark>{escape(text[start:end])}</mark>")
        position = end
    pieces.append(escape(text[position:]))
    return mark_safe("".join(pieces))
