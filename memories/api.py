"""The public API: exactly five memory routes, thin views over the model methods
and the one recall entry point.

    GET  /v1/memories                list, filter, paginate (newest first)
    POST /v1/memories                create (remember: active; propose: staged)
    POST /v1/memories/{id}           one action (confirm, reject, restore, ..., redact)
    GET  /v1/memories/{id}/chain     the supersede chain, oldest first, with events
    POST /v1/memories/search         retrieval: memories plus the fenced block

Every query is scoped to the token's owner; another owner's id is a 404, the
same as an id that does not exist.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import prefetch_related_objects
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories import access_log, redaction
from memories.api_schema import (
    CHAIN_EXAMPLE,
    CREATED_EXAMPLE,
    IDEMPOTENCY_PARAMETER,
    MEMORY_EXAMPLE,
    MEMORY_ID_PARAMETER,
    SEARCH_EXAMPLE,
    error_responses,
)
from memories.auth import require_scope
from memories.disk_erase import DiskErase, erase_for, request_erase
from memories.errors import ApiError, LengthRequired, PayloadTooLarge
from memories.idempotency import run_idempotently
from memories.memory_json import memory_to_dict
from memories.models import IllegalTransition, Memory, MemoryEvent, RedactionRefused
from memories.provenance import token_metadata
from memories.related import RelatedResult, find_related
from memories.serializers import (
    ALL_STATUSES,
    ChainSerializer,
    CreatedMemorySerializer,
    MemoryActionSerializer,
    MemoryCreateSerializer,
    MemoryListQuerySerializer,
    MemoryPageSerializer,
    MemorySerializer,
    SearchResultSerializer,
    SearchSerializer,
    reject_lone_surrogates,
)
from memories.tasks import vector_stored
from retrieval.models import RetrievalStamp
from retrieval.recall import recall
from retrieval.results import RecallFailed
from timothy.request_body import is_unsized_chunked

# Ids are PostgreSQL bigints; anything larger cannot exist.
MAX_MEMORY_ID = 2**63 - 1
# An over-limit body up to this many times the limit is read and dropped before
# the 413, so that the client, still sending, gets the answer instead of a reset.
DRAIN_FACTOR = 4
DRAIN_CHUNK = 64 * 1024


# --- plumbing shared with the internal surface -------------------------------------


class LimitedJSONParser(JSONParser):
    """JSON only, strict (no NaN/Infinity), and never more than MAX_BODY_BYTES."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        limit = settings.MAX_BODY_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(limit)
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"The body is not valid JSON: {exc}")
        except RecursionError:
            raise ParseError("The body is nested too deeply.")
        reject_lone_surrogates(data)
        return data


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def check_body_size(request: Request) -> None:
    """413 before any parsing when the declared body is over the limit; 411 when
    a chunked body came through a server that could not say how long it is."""
    if is_unsized_chunked(request.META):
        raise LengthRequired()
    limit = settings.MAX_BODY_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        if length <= limit * DRAIN_FACTOR:
            while request._request.read(DRAIN_CHUNK):
                pass
        raise PayloadTooLarge(limit)


class ApiView(APIView):
    """Base of every API view: JSON in and out, body limit, no OPTIONS metadata."""

    parser_classes = [LimitedJSONParser]
    http_method_names = ["get", "post", "head"]
    metadata_class = None

    def initial(self, request: Request, *args, **kwargs) -> None:
        check_body_size(request)
        super().initial(request, *args, **kwargs)


def run_recall(owner, params: dict) -> Response:
    """The search answer for validated search parameters (public and internal)."""
    try:
        result = recall(
            owner,
            params["query"],
            pipeline=params.get("pipeline"),
            token_budget=params.get("token_budget"),
            types=params.get("types"),
            as_of=params.get("as_of"),
            explain=params.get("explain", False),
            session_id=params.get("session_id", ""),
        )
    except RecallFailed as exc:
        raise ApiError(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "retrieval_unavailable",
            str(exc) or "Every retrieval leg failed.",
            {"legs": {name: report.to_dict() for name, report in exc.legs.items()}},
        )
    except ValueError as exc:
        raise ApiError(status.HTTP_400_BAD_REQUEST, "invalid_request", str(exc))
    response = Response(result.to_dict())
    response["Server-Timing"] = server_timing(result)
    return response


def server_timing(result) -> str:
    """Where the recall's time went, for browsers' and benchmarks' eyes (W3C Server-Timing)."""
    stages = [(name, result.timings.get(name)) for name in ("embed", "legs", "fuse", "pack")]
    stages += [(f"leg-{name}", report.ms) for name, report in result.legs.items()]
    stages.append(("recall", result.ms))
    return ", ".join(f"{name};dur={ms:.2f}" for name, ms in stages if ms is not None)


# --- reading helpers ---------------------------------------------------------------------


def owned_memory(owner, memory_id: int) -> Memory:
    memory = None
    if 0 < memory_id <= MAX_MEMORY_ID:
        memory = Memory.objects.for_owner(owner).filter(pk=memory_id).first()
    if memory is None:
        # The same answer for "no such id" and "someone else's id".
        raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No memory {memory_id}.")
    return memory


def encode_cursor(memory: Memory) -> str:
    raw = f"{memory.created_at.isoformat()}|{memory.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, _, memory_id = base64.urlsafe_b64decode(padded).decode().partition("|")
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None:
            raise ValueError("naive")
        return moment, int(memory_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(
            status.HTTP_400_BAD_REQUEST,
            "invalid_cursor",
            "cursor must be the next_cursor of a previous page.",
        )


def list_memories(
    owner,
    *,
    status: str,
    limit: int,
    type: str | None = None,
    entity: str | None = None,
    q: str | None = None,
    session_id: str | None = None,
    cursor: str | None = None,
) -> tuple[list[Memory], str | None]:
    """One page of the owner's memories, newest first, and the next page's cursor."""
    memories = Memory.objects.for_owner(owner)
    if status != ALL_STATUSES:
        memories = memories.filter(status=status)
    if type:
        memories = memories.filter(type=type)
    if session_id is not None:
        memories = memories.filter(session_id=session_id)
    if entity:
        memories = memories.naming(entity)
    if q:
        memories = memories.matching(q)
    if cursor:
        memories = memories.before(*decode_cursor(cursor))
    rows = list(
        memories.select_related("retrieval_stamp").order_by("-created_at", "-id")[: limit + 1]
    )
    next_cursor = encode_cursor(rows[limit - 1]) if len(rows) > limit else None
    return rows[:limit], next_cursor


def event_to_dict(event: MemoryEvent) -> dict[str, Any]:
    return {
        "action": event.action,
        "at": event.at.isoformat(),
        "actor": event.actor.get_username() if event.actor_id else None,
        "via": event.via,
        "reason": event.reason,
        "data": event.data,
    }


def chain_to_dict(owner, memory: Memory) -> dict[str, Any]:
    versions = [v for v in Memory.objects.chain(memory) if v.owner_id == owner.pk]
    prefetch_related_objects(versions, "retrieval_stamp")
    events: dict[int, list[dict]] = defaultdict(list)
    for event in (
        MemoryEvent.objects.filter(owner=owner, memory__in=versions)
        .select_related("actor")
        .order_by("at", "id")
    ):
        events[event.memory_id].append(event_to_dict(event))
    return {
        "head_id": memory.head_id(),
        "memories": [memory_to_dict(v) | {"events": events[v.pk]} for v in versions],
    }


# --- the five routes ---------------------------------------------------------------------


class MemoryCollectionView(ApiView):
    @extend_schema(
        operation_id="list_memories",
        summary="List memories",
        description="The owner's memories, newest first, one page at a time "
        "(follow next_cursor). status defaults to active; 'all' lists every status.",
        parameters=[MemoryListQuerySerializer],
        responses={200: MemoryPageSerializer, **error_responses(400, 401, 403, 429, 503)},
        examples=[
            OpenApiExample(
                "a page",
                value={"memories": [MEMORY_EXAMPLE], "next_cursor": None},
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        require_scope(request.auth, "read")
        query = MemoryListQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        page, next_cursor = list_memories(request.user, **query.validated_data)
        return Response({"memories": [memory_to_dict(m) for m in page], "next_cursor": next_cursor})

    @extend_schema(
        operation_id="create_memory",
        summary="Create a memory",
        description="mode remember: the owner's explicit fact, active at once with "
        "confidence 1 and source remember; if it duplicates an active memory, it is written "
        "as that memory's new version (one copy, history kept). mode propose: staged for the "
        "owner's confirmation queue. Every answer lists the active memories the new one "
        "repeats (duplicate) or updates (update) in related.",
        request=MemoryCreateSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={
            201: CreatedMemorySerializer,
            **error_responses(400, 401, 403, 413, 415, 422, 429, 503),
        },
        examples=[
            OpenApiExample(
                "remember",
                value={
                    "content": "Prefers an aisle seat on long-haul flights.",
                    "type": "preference",
                    "entities": ["flights"],
                    "mode": "remember",
                },
                request_only=True,
            ),
            OpenApiExample(
                "propose",
                value={
                    "content": "Is training for the Berlin marathon.",
                    "type": "episodic",
                    "entities": ["Berlin marathon"],
                    "confidence": 0.7,
                    "session_id": "chat-2024-05-01",
                    "mode": "propose",
                },
                request_only=True,
            ),
            OpenApiExample("created", value=CREATED_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        body = MemoryCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        remember = body.validated_data["mode"] == MemoryCreateSerializer.Mode.REMEMBER
        require_scope(request.auth, "write" if remember else "propose")
        return run_idempotently(
            request, lambda: self._create(request.user, body.validated_data, request.auth)
        )

    @staticmethod
    def _create(owner, data: dict, token=None) -> Response:
        fields = {
            "entities": data.get("entities", ()),
            "session_id": data.get("session_id", ""),
            "metadata": token_metadata(token),
            "actor": owner,
            "via": "api",
        }
        # Pending proposals too: the same fact proposed twice is one in the queue.
        found = find_related(
            owner,
            data["content"],
            entities=fields["entities"],
            type=data["type"],
            about=data.get("about"),
            include_proposals=True,
        )
        # The caller's about, or the one judged here (with the embedding's help).
        fields["about"] = data.get("about") or found.about
        # Computed for the check already: written with the row, in its INSERT,
        # and no background task queued to compute it again.
        fields["embedding"] = found.embedding
        with transaction.atomic():
            if data["mode"] == MemoryCreateSerializer.Mode.REMEMBER:
                memory = remember_once(owner, data["content"], data["type"], found, **fields)
            else:
                if "confidence" in data:
                    fields["confidence"] = data["confidence"]
                memory = Memory.propose(owner, data["content"], data["type"], **fields)
            if found.embedding is not None:
                vector_stored(memory.pk)
        # A row written just now has never been retrieved: no query for its stamp.
        RetrievalStamp.attach(memory, None)
        body = memory_to_dict(memory) | {"related": found.to_list()}
        return Response(body, status=status.HTTP_201_CREATED)


def remember_once(owner, content: str, type: str, found: RelatedResult, **fields) -> Memory:
    """Remember a fact; one that duplicates an active memory becomes its new version,
    so the store keeps one copy (in the owner's latest words) and its history."""
    for duplicate in found.duplicates:
        try:
            return Memory.remember(
                owner,
                content,
                type,
                replaces=duplicate.memory,
                reason=f"remembered again (duplicate of memory {duplicate.memory.pk})",
                **fields,
            )
        except IllegalTransition:
            continue  # replaced meanwhile: try the next, or write it beside them
    return Memory.remember(owner, content, type, **fields)


class MemoryDetailView(ApiView):
    @extend_schema(
        operation_id="act_on_memory",
        summary="Confirm, reject, restore, reconfirm, archive, supersede or redact a memory",
        description="confirm / reject a proposed memory (confirm with replaces: N makes it "
        "the new version of active memory N, in one transaction; 404 if N is not yours, "
        "409 if N is no longer active; copies: [ids] rejects the owner's other proposals of "
        "the same fact as its duplicates in the same decision, named in settled_copies); "
        "restore a rejected one to the confirmation queue; "
        "reconfirm (reset its decay) or archive an active one; supersede an active or "
        "proposed one with a new version (content, optionally type and entities), answered "
        "201 with the new head (an edit that changes nothing writes no version: 200 with "
        "the memory as it is, a proposal confirmed as it is); redact any memory that is "
        "not yet redacted (a reason is required; chain: true erases every version of its "
        "chain): its text, entities and embedding are erased for good and the row stays in "
        "its chain, answered 200 with the redacted memory (erase_from_disk: true also queues "
        "an erase from disk); erase_from_disk on a redacted memory: the erase that covers it "
        "(queued if none does), answered 200 once complete, else 202 with its progress.",
        parameters=[MEMORY_ID_PARAMETER, IDEMPOTENCY_PARAMETER],
        request=MemoryActionSerializer,
        responses={
            200: OpenApiResponse(
                MemorySerializer,
                description="The memory after the action (erase_from_disk: the erase, complete).",
            ),
            201: OpenApiResponse(MemorySerializer, description="supersede: the new head."),
            202: OpenApiResponse(
                description="erase_from_disk: the erase, requested or running, with its progress."
            ),
            **error_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
        examples=[
            OpenApiExample("confirm", value={"action": "confirm"}, request_only=True),
            OpenApiExample(
                "confirm as a new version",
                value={"action": "confirm", "replaces": 42, "reason": "new seat preference"},
                request_only=True,
            ),
            OpenApiExample(
                "confirm and settle its copies",
                value={"action": "confirm", "copies": [58, 61]},
                request_only=True,
            ),
            OpenApiExample("restore", value={"action": "restore"}, request_only=True),
            OpenApiExample(
                "redact",
                value={"action": "redact", "chain": True, "reason": "a password, by mistake"},
                request_only=True,
            ),
            OpenApiExample(
                "supersede",
                value={
                    "action": "supersede",
                    "content": "Prefers a window seat on long-haul flights.",
                    "reason": "changed her mind",
                },
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request, memory_id: int) -> Response:
        require_scope(request.auth, "write")
        memory = owned_memory(request.user, memory_id)
        body = MemoryActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return run_idempotently(request, self._action(request.user, memory, body.validated_data))

    @staticmethod
    def _action(owner, memory: Memory, data: dict) -> Callable[[], Response]:
        context = {"actor": owner, "via": "api", "reason": data.get("reason", "")}
        if "replaces" in data:
            context["replaces"] = owned_memory(owner, data["replaces"])
        if data["action"] == "supersede":

            def supersede() -> Response:
                new = memory.edit(
                    data.get("content"),
                    type=data.get("type"),
                    entities=data.get("entities"),
                    confidence=data.get("confidence"),
                    about=data.get("about"),
                    **context,
                )
                if new.pk == memory.pk:
                    # Nothing changed: no version written (a proposal is confirmed as it is).
                    return Response(memory_to_dict(new))
                return Response(memory_to_dict(new), status=status.HTTP_201_CREATED)

            return supersede

        if data["action"] == "redact":

            def redact() -> Response:
                try:
                    redaction.redact(memory, chain=data.get("chain", False), **context)
                except RedactionRefused as refused:
                    raise ApiError(status.HTTP_400_BAD_REQUEST, refused.code, refused.message)
                if data.get("erase_from_disk"):
                    request_erase(owner=owner, via="api")
                return Response(memory_to_dict(memory))

            return redact

        if data["action"] == "erase_from_disk":

            def erase() -> Response:
                if memory.status != Memory.Status.REDACTED:
                    raise ApiError(
                        status.HTTP_409_CONFLICT,
                        "not_redacted",
                        "Only a redacted memory is erased from disk: redact it first.",
                    )
                found = erase_for(memory)
                if found is None or found.state == DiskErase.State.FAILED:
                    found = request_erase(owner=owner, via="api")
                done = found.state == DiskErase.State.COMPLETE
                return Response(
                    {"memory": memory.pk, "disk_erase": found.as_dict()},
                    status=status.HTTP_200_OK if done else status.HTTP_202_ACCEPTED,
                )

            return erase

        def change() -> Response:
            getattr(memory, data["action"])(**context)
            answer = memory_to_dict(memory)
            if "copies" in data:
                settled = memory.settle_copies(data["copies"], actor=owner, via="api")
                answer["settled_copies"] = [copy.pk for copy in settled]
            return Response(answer)

        return change


class MemoryChainView(ApiView):
    @extend_schema(
        operation_id="memory_chain",
        summary="The supersede chain of a memory",
        description="Every version in the memory's chain, oldest first, from any member, "
        "each with its events (who, when, via what, why).",
        parameters=[MEMORY_ID_PARAMETER],
        responses={200: ChainSerializer, **error_responses(401, 403, 404, 429, 503)},
        examples=[OpenApiExample("a chain of two", value=CHAIN_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, memory_id: int) -> Response:
        require_scope(request.auth, "read")
        memory = owned_memory(request.user, memory_id)
        return Response(chain_to_dict(request.user, memory))


class MemorySearchView(ApiView):
    @extend_schema(
        operation_id="search_memories",
        summary="Retrieve memories for a message",
        description="Runs the retrieval pipeline over the owner's active memories and "
        "returns the packed memories (best first) and the fenced block to append after "
        "the system prompt's stable prefix, within token_budget tokens.",
        request=SearchSerializer,
        responses={
            200: SearchResultSerializer,
            **error_responses(400, 401, 403, 413, 415, 429, 503),
        },
        examples=[
            OpenApiExample(
                "search",
                value={
                    "query": "Which seat do I like on long flights?",
                    "token_budget": 512,
                    "pipeline": "fusion",
                },
                request_only=True,
            ),
            OpenApiExample("found", value=SEARCH_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        require_scope(request.auth, "read")
        body = SearchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        response = run_recall(request.user, body.validated_data)
        # Which token got which memories (memories/access_log.py), off the turn.
        access_log.record_search(
            request.user,
            request.auth,
            body.validated_data["query"],
            response.data,
            source=access_log.AccessRecord.Source.API,
        )
        return response
