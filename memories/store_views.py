"""The owner's whole store in the browser: download it, upload a file to import.

The download is exactly what ``export_memories`` writes (memories/io.py
``export_lines``, one JSON object per line). An upload is read as
``import_memories`` reads a file, but nothing is written at first: the file is
kept in ``DATA_DIR/uploads`` under a random name, its name held in the owner's
session, and a preview lists what would be added and which lines are bad and
why. Confirming imports the good lines (``import_memories``) and deletes the
file; an upload not confirmed is deleted by the owner's next upload, or by any
upload once it is a day old.

Uploads are bounded by ``MAX_UPLOAD_BYTES`` (``TIMOTHY_MAX_UPLOAD_BYTES``): a
request that declares a larger body is refused before it is read.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from memories.io import LineError, ParsedLine, export_lines, import_memories, read_lines
from memories.models import Memory
from memories.views import owner_time_zone

logger = logging.getLogger(__name__)

# Session key holding the pending upload: {"id": ..., "name": ...}.
PENDING_SESSION_KEY = "timothy_pending_import"
UPLOAD_FOLDER = "uploads"
UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
# An upload not confirmed within this long is deleted by the next upload.
UPLOAD_MAX_AGE_SECONDS = 24 * 3600
# How many lines to add, and bad lines, the preview lists.
PREVIEW_LINES = 10
PREVIEW_ERRORS = 50
# Contents compared with the store per statement (repeats in the preview).
REPEAT_BATCH = 1000
MAX_SHOWN_NAME = 120


def _folder() -> Path:
    return Path(settings.DATA_DIR) / UPLOAD_FOLDER


def _path(owner, upload_id: str) -> Path:
    return _folder() / f"{owner.pk}-{upload_id}.jsonl"


def _size_text(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.0f} MB"
    return f"{size / 1024:.0f} KB"


@login_required
@require_GET
def store(request: HttpRequest) -> HttpResponse:
    return _store_page(request)


def _store_page(request: HttpRequest, error: str = "", status: int = 200) -> HttpResponse:
    return render(
        request,
        "memories/store.html",
        {
            "count": Memory.objects.for_owner(request.user).count(),
            "limit": _size_text(settings.MAX_UPLOAD_BYTES),
            "error": error,
        },
        status=status,
    )


@never_cache
@login_required
@require_GET
def download(request: HttpRequest) -> StreamingHttpResponse:
    """Every memory of the owner as JSON Lines, as ``export_memories`` writes them."""
    name = f"timothy-{request.user.get_username()}-{timezone.localdate():%Y-%m-%d}.jsonl"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    response = StreamingHttpResponse(
        (line + "\n" for line in export_lines(request.user)),
        content_type="application/jsonl; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# --- upload and preview ----------------------------------------------------------------


@dataclass
class Preview:
    name: str
    size: int
    good: int
    bad: int
    by_status: list[tuple[str, int]]
    first: list[ParsedLine]
    errors: list[LineError]
    repeats: int
    chained: int = 0
    more_errors: int = 0


# The upload is checked for size before anything reads its body, so CSRF is
# checked by the inner view, after that check (Django's way for upload handlers).
@csrf_exempt
@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > settings.MAX_UPLOAD_BYTES + 64 * 1024:
        return _too_large(request)
    return _upload(request)


def _too_large(request: HttpRequest) -> HttpResponse:
    limit = _size_text(settings.MAX_UPLOAD_BYTES)
    return _store_page(
        request,
        f"The file is larger than {limit}, the most this page takes: split it, "
        "or use the import_memories command.",
        status=413,
    )


@csrf_protect
@owner_time_zone
def _upload(request: HttpRequest) -> HttpResponse:
    uploaded = request.FILES.get("file")
    if uploaded is None:
        return _store_page(request, "Choose a file to upload first.", status=400)
    if uploaded.size > settings.MAX_UPLOAD_BYTES:
        return _too_large(request)
    if uploaded.size == 0:
        return _store_page(request, "The file is empty: there is nothing to import.", status=400)
    _sweep(request)
    upload_id = secrets.token_hex(16)
    path = _path(request.user, upload_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for chunk in uploaded.chunks():
            out.write(chunk)
    name = (uploaded.name or "upload.jsonl")[:MAX_SHOWN_NAME]
    request.session[PENDING_SESSION_KEY] = {"id": upload_id, "name": name}
    preview = _preview(request.user, path, name)
    return render(
        request, "memories/store_preview.html", {"preview": preview, "upload_id": upload_id}
    )


def _sweep(request: HttpRequest) -> None:
    """Delete the owner's pending upload, and anyone's older than a day."""
    pending = request.session.pop(PENDING_SESSION_KEY, None)
    if pending and UPLOAD_ID.match(str(pending.get("id", ""))):
        _path(request.user, pending["id"]).unlink(missing_ok=True)
    folder = _folder()
    if not folder.is_dir():
        return
    cutoff = time.time() - UPLOAD_MAX_AGE_SECONDS
    for old in folder.glob("*.jsonl"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink(missing_ok=True)
        except OSError:
            logger.warning("could not remove the stale upload %s", old.name)


def _preview(owner, path: Path, name: str) -> Preview:
    with path.open("rb") as lines:
        parsed, errors = read_lines(lines, now=timezone.now())
    good = [item for item in parsed if not item.error]
    by_status = Counter(item.status for item in good)
    labels = dict(Memory.Status.choices)
    return Preview(
        name=name,
        size=path.stat().st_size,
        good=len(good),
        bad=len(errors),
        by_status=[(labels.get(status, status), n) for status, n in by_status.most_common()],
        first=good[:PREVIEW_LINES],
        errors=errors[:PREVIEW_ERRORS],
        more_errors=max(0, len(errors) - PREVIEW_ERRORS),
        repeats=_repeats(owner, good),
        chained=sum(1 for item in good if item.depth),
    )


def _repeats(owner, good: list[ParsedLine]) -> int:
    """How many of the lines repeat the exact text of one of the owner's memories."""
    contents = [item.fields["content"] for item in good if item.status != Memory.Status.REDACTED]
    held: set[str] = set()
    unique = sorted(set(contents))
    for start in range(0, len(unique), REPEAT_BATCH):
        batch = unique[start : start + REPEAT_BATCH]
        held.update(
            Memory.objects.for_owner(owner)
            .filter(content__in=batch)
            .values_list("content", flat=True)
        )
    return sum(1 for content in contents if content in held)


# --- confirm -------------------------------------------------------------------------------


@login_required
@owner_time_zone
@require_POST
def confirm_import(request: HttpRequest) -> HttpResponse:
    pending = request.session.get(PENDING_SESSION_KEY) or {}
    upload_id = str(request.POST.get("upload", ""))
    path = _path(request.user, upload_id) if UPLOAD_ID.match(upload_id) else None
    if pending.get("id") != upload_id or path is None or not path.is_file():
        messages.error(
            request,
            "That upload is no longer waiting (it was imported, replaced by another, "
            "or is more than a day old): upload the file again.",
        )
        return redirect("store")
    name = pending.get("name") or "upload.jsonl"
    with path.open("rb") as lines:
        result = import_memories(lines, request.user, source_name=name)
    request.session.pop(PENDING_SESSION_KEY, None)
    path.unlink(missing_ok=True)
    added = f"Imported {result.imported} memor{'y' if result.imported == 1 else 'ies'} from {name}"
    if result.failed:
        skipped = "1 line was" if result.failed == 1 else f"{result.failed} lines were"
        messages.warning(request, f"{added}; {skipped} left out (they could not be read).")
    else:
        messages.success(request, f"{added}.")
    return redirect("memory-list")


@login_required
@require_POST
def cancel_import(request: HttpRequest) -> HttpResponse:
    _sweep(request)
    messages.info(request, "The upload was discarded; nothing was imported.")
    return redirect("store")
