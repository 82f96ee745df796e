"""``Idempotency-Key`` on the creating calls: a retried request replays the first answer.

The write and the record of its answer commit in one transaction. Two requests
racing with the same key both try to insert the record; the unique constraint
on (owner, key) makes the second wait for the first, fail, roll back its own
write and replay the first answer (a racing supersede fails earlier, on the row
lock, and replays the same way). So a key writes at most once, even under
concurrency, and a crash between write and record cannot happen.

Only successful answers are kept: a request that failed wrote nothing, so its
retry runs again. A key reused for a different request (another path or
another body) is a 422. Keys are kept per owner for ``IDEMPOTENCY_KEY_HOURS``;
after that the key is free again, and the daily job deletes the records.

Only a SHA-256 of each key is stored, since a client may build keys from what
it stores. A redaction rewrites the records that held what it erases
(``memories.redaction``): the answer becomes the redacted memory, and the request's
hash is dropped, so a retry replays that answer and never writes the text again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable

from django.db import IntegrityError, transaction
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from memories.errors import ApiError
from memories.idempotency_records import REDACTED_REQUEST, IdempotencyRecord, expiry_cutoff
from memories.models import IllegalTransition

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_CHARS = 200
# Visible ASCII, no spaces: what survives every HTTP stack unchanged.
KEY_PATTERN = rf"^[!-~]{{1,{MAX_KEY_CHARS}}}$"
# The request hash of a record whose request a redaction erased: any body replays.


def idempotency_key(request: Request) -> str | None:
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    key = raw.strip()
    if not re.fullmatch(KEY_PATTERN, key):
        raise ApiError(
            status.HTTP_400_BAD_REQUEST,
            "invalid_idempotency_key",
            f"{HEADER} must be 1 to {MAX_KEY_CHARS} visible ASCII characters, no spaces.",
        )
    return key


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _request_hash(data) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replay(record: IdempotencyRecord, endpoint: str, request_hash: str) -> Response:
    same_request = record.request_hash in (request_hash, REDACTED_REQUEST)
    if record.endpoint != endpoint or not same_request:
        raise ApiError(
            status.HTTP_422_UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            f"This {HEADER} was already used for a different request; use a new key.",
        )
    return Response(
        record.response_body,
        status=record.response_status,
        headers={REPLAYED_HEADER: "true"},
    )


def _find(owner, key: str) -> IdempotencyRecord | None:
    return IdempotencyRecord.objects.filter(
        owner=owner, key_digest=key_digest(key), created_at__gte=expiry_cutoff()
    ).first()


def run_idempotently(request: Request, perform: Callable[[], Response]) -> Response:
    """Run ``perform`` (which writes), or replay the answer already given for this key."""
    key = idempotency_key(request)
    if key is None:
        return perform()
    owner = request.user
    endpoint = f"{request.method} {request.path}"
    request_hash = _request_hash(request.data)
    existing = _find(owner, key)
    if existing is not None:
        return _replay(existing, endpoint, request_hash)
    # An expired record of this key would clash with the new one.
    IdempotencyRecord.objects.filter(
        owner=owner, key_digest=key_digest(key), created_at__lt=expiry_cutoff()
    ).delete()
    try:
        with transaction.atomic():
            response = perform()
            if status.is_success(response.status_code):
                IdempotencyRecord.objects.create(
                    owner=owner,
                    key_digest=key_digest(key),
                    endpoint=endpoint,
                    request_hash=request_hash,
                    response_status=response.status_code,
                    response_body=response.data,
                )
    except (IntegrityError, IllegalTransition):
        # Another request with this key committed first: its write stands, ours
        # was rolled back (the record insert clashed, or a supersede found the
        # memory already superseded by that very request).
        existing = _find(owner, key)
        if existing is None:
            raise
        return _replay(existing, endpoint, request_hash)
    return response
