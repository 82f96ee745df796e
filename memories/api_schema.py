"""What the OpenAPI schema says beyond what the code shows: the bearer scheme,
error responses with examples, shared parameters and example bodies.

memories/api.py decorates its views with these; the schema is served at
/api/schema/ (and browsable at /api/docs/).
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from memories.idempotency import HEADER as IDEMPOTENCY_HEADER
from memories.idempotency import KEY_PATTERN
from memories.serializers import ErrorSerializer
from retrieval.render import render_block


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "memories.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (tm_...) made on the Tokens page or with "
            "`manage.py createtoken`.",
        }


ERROR_DESCRIPTIONS = {
    400: "Bad body or parameters: malformed JSON, wrong types, unknown fields, empty or "
    "over-long content, NUL bytes, unknown type or action.",
    401: "No token, a malformed Authorization header, or an unknown or revoked token.",
    403: "The token lacks the scope this needs (missing_scope: read, propose or write), "
    "or it is paused (token_paused).",
    404: "No such memory for this owner (another owner's id looks the same).",
    409: "The memory's status does not allow this action; details carry the current "
    "status and, for a superseded memory, the head's id.",
    413: "The body is larger than the limit.",
    415: "The body is not application/json.",
    422: "The Idempotency-Key was already used for a different request.",
    429: "Over the per-token rate limit; Retry-After says when to try again.",
    503: "The database (or, for search, every retrieval leg) is unavailable.",
}

ERROR_EXAMPLES = {
    400: {"code": "invalid_request", "message": "content: This field is required."},
    401: {"code": "unauthorized", "message": "The token is unknown or has been revoked."},
    403: {
        "code": "missing_scope",
        "message": "This token may not remember or act on memories: that needs the write "
        "scope, and it has read, propose. Create a token with the write scope on the Tokens "
        "page.",
        "details": {"required_scope": "write", "token_scopes": ["read", "propose"]},
    },
    404: {"code": "not_found", "message": "No memory 42."},
    409: {
        "code": "illegal_transition",
        "message": "Cannot confirm memory 42: it is superseded; the head of its chain is "
        "memory 57.",
        "details": {"id": 42, "action": "confirm", "status": "superseded", "head_id": 57},
    },
    413: {"code": "payload_too_large", "message": "The request body is larger than the limit."},
    415: {"code": "unsupported_media_type", "message": 'Unsupported media type "text/plain".'},
    422: {"code": "idempotency_key_reused", "message": "This Idempotency-Key was already used."},
    429: {"code": "rate_limited", "message": "Too many requests for this token."},
    503: {"code": "database_unavailable", "message": "The database is unavailable."},
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {
        code: OpenApiResponse(
            ErrorSerializer,
            description=ERROR_DESCRIPTIONS[code],
            examples=[OpenApiExample(f"error {code}", value={"error": ERROR_EXAMPLES[code]})],
        )
        for code in codes
    }


IDEMPOTENCY_PARAMETER = OpenApiParameter(
    IDEMPOTENCY_HEADER,
    {"type": "string", "pattern": KEY_PATTERN},
    location=OpenApiParameter.HEADER,
    description="Retrying with the same key returns the first answer instead of writing "
    "twice (header Idempotent-Replayed: true).",
)

MEMORY_EXAMPLE = {
    "id": 42,
    "type": "preference",
    "content": "Prefers an aisle seat on long-haul flights.",
    "status": "active",
    "entities": ["flights"],
    "confidence": 1.0,
    "source": "remember",
    "session_id": "chat-2024-05-01",
    "created_at": "2026-05-01T09:30:00+00:00",
    "last_confirmed_at": "2026-05-01T09:30:00+00:00",
    "last_retrieved_at": None,
    "superseded_by": None,
}

CREATED_EXAMPLE = MEMORY_EXAMPLE | {
    "id": 57,
    "content": "Prefers a window seat on long-haul flights.",
    "related": [
        {
            "id": 42,
            "relation": "update",
            "score": 0.912,
            "content": "Prefers an aisle seat on long-haul flights.",
        }
    ],
}

CHAIN_EXAMPLE = {
    "head_id": 57,
    "memories": [
        MEMORY_EXAMPLE
        | {
            "status": "superseded",
            "superseded_by": 57,
            "events": [
                {
                    "action": "created",
                    "at": "2026-05-01T09:30:00+00:00",
                    "actor": "owner",
                    "via": "api",
                    "reason": "",
                    "data": {},
                },
                {
                    "action": "superseded",
                    "at": "2026-06-02T18:04:11+00:00",
                    "actor": "owner",
                    "via": "api",
                    "reason": "changed her mind",
                    "data": {"from": "active", "successor": 57},
                },
            ],
        },
        MEMORY_EXAMPLE
        | {
            "id": 57,
            "content": "Prefers a window seat on long-haul flights.",
            "created_at": "2026-06-02T18:04:11+00:00",
            "last_confirmed_at": "2026-06-02T18:04:11+00:00",
            "events": [
                {
                    "action": "version",
                    "at": "2026-06-02T18:04:11+00:00",
                    "actor": "owner",
                    "via": "api",
                    "reason": "changed her mind",
                    "data": {"supersedes": [42]},
                }
            ],
        },
    ],
}

SEARCH_EXAMPLE = {
    "pipeline": "fusion",
    "as_of": "2026-11-30T02:40:00+00:00",
    "memories": [
        MEMORY_EXAMPLE
        | {
            "last_retrieved_at": "2026-11-30T02:40:00+00:00",
            "score": 0.0323,
            "score_parts": {
                "ranks": {"text": 1, "entity": 1},
                "rrf": 0.0328,
                "decay": 0.985,
                "weight": 1.0,
                "final": 0.0323,
            },
            "tokens": 12,
            "position": 0,
        }
    ],
    "block": render_block([("preference", "Prefers an aisle seat on long-haul flights.")]),
    "block_tokens": 48,
    "token_budget": 512,
    "legs": {
        "vector": {"status": "ok", "ms": 8.1, "count": 30},
        "text": {"status": "ok", "ms": 3.4, "count": 1},
        "entity": {"status": "ok", "ms": 1.2, "count": 1},
    },
    "ms": 14.9,
}

MEMORY_ID_PARAMETER = OpenApiParameter(
    "memory_id", OpenApiTypes.INT64, location=OpenApiParameter.PATH
)
