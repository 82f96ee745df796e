"""Template helpers of the owner's pages: times, counts, names, titles, memory text."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil

from memories import provenance, vocabulary
from memories.matching import highlight_spans
from memories.models import Memory
from retrieval.render import invisible_positions

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
        return show_invisible(text)
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(show_invisible(text[position:start]))
        pieces.append(f"<mark>{show_invisible(text[start:end])}</mark>")
        position = end
    pieces.append(show_invisible(text[position:]))
    return mark_safe("".join(pieces))
