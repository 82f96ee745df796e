"""The internal surface, served only by the internal listener (timothy/internal_urls.py).

    POST /internal/v1/retrieve   what the chat side calls per user message: the
                                 search body plus "owner" (a username); the
                                 same answer as POST /v1/memories/search
    POST /internal/v1/extract    extraction from a conversation: 202 at once,
                                 the facts are proposed in the background

Authenticated with ``Authorization: Bearer <TIMOTHY_SERVICE_TOKEN>``, compared
in constant time. With no service token configured every call is refused with
503 ``service_token_not_configured``: a listener nobody configured must not
answer anyone. There is no per-token rate limit here; the caller is our own
chat service.

``/internal/v1/extract`` also takes an owner's API token with the propose
scope, for that owner only (another owner's name is a 403): an assistant's key
can send its owner's conversations to extraction without the service token,
which reads every owner's memories.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework import authentication, exceptions, permissions, status
from rest_framework.decorators import (
    api_view,
    authentication_classes,
    parser_classes,
    permission_classes,
    throttle_classes,
)
from rest_framework.request import Request
from rest_framework.response import Response

from memories import access_log
from memories.api import LimitedJSONParser, check_body_size, run_recall
from memories.api_tokens import TOKEN_PREFIX, ApiToken
from memories.auth import paused_error, require_scope
from memories.errors import ApiError
from memories.serializers import InternalRetrieveSerializer


class ServiceCaller:
    """request.user on the internal surface: the chat service, not an owner."""

    is_authenticated = True
    username = "service"


class ServiceTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        configured = settings.SERVICE_TOKEN
        scheme, _, given = authentication.get_authorization_header(request).partition(b" ")
        given = given.strip()
        if (
            scheme.lower() == self.keyword.lower().encode()
            and given.startswith(TOKEN_PREFIX.encode())
            and not (configured and hmac.compare_digest(given, configured.encode()))
        ):
            # An owner's API token (memories/tokens.py): extraction for that owner only.
            token = ApiToken.authenticate(given.decode("latin-1"))
            if token is None:
                raise exceptions.AuthenticationFailed("The token is unknown or has been revoked.")
            if token.is_paused:
                raise paused_error(token)
            return token.owner, token
        if not configured:
            raise ApiError(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "service_token_not_configured",
                "The internal surface is disabled: set TIMOTHY_SERVICE_TOKEN to enable it.",
            )
        header = authentication.get_authorization_header(request)
        scheme, _, raw = header.partition(b" ")
        if scheme.lower() != self.keyword.lower().encode() or not raw.strip():
            raise exceptions.NotAuthenticated(
                "Use an 'Authorization: Bearer <service token>' header."
            )
        if not hmac.compare_digest(raw.strip(), configured.encode()):
            raise exceptions.AuthenticationFailed("The service token is wrong.")
        return ServiceCaller(), "service"

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="timothy-internal"'


class IsService(permissions.BasePermission):
    def has_permission(self, request: Request, view) -> bool:
        return request.auth == "service" or isinstance(request.auth, ApiToken)


def internal_view(function: Callable[[Request], Response]) -> Callable:
    """A POST-only internal route: service token, JSON body within the size limit."""

    def view(request: Request) -> Response:
        check_body_size(request)
        return function(request)

    view.__name__ = function.__name__
    view.__doc__ = function.__doc__
    for decorate in (
        throttle_classes([]),
        permission_classes([IsService]),
        authentication_classes([ServiceTokenAuthentication]),
        parser_classes([LimitedJSONParser]),
        api_view(["POST"]),
    ):
        view = decorate(view)
    return view


@internal_view
def retrieve(request: Request) -> Response:
    if isinstance(request.auth, ApiToken):
        raise ApiError(
            status.HTTP_403_FORBIDDEN,
            "service_token_required",
            "Only the service token may retrieve here; with an owner's token use "
            "POST /v1/memories/search.",
        )
    body = InternalRetrieveSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    owner = (
        get_user_model()
        .objects.filter(
            is_active=True, **{get_user_model().USERNAME_FIELD: body.validated_data["owner"]}
        )
        .first()
    )
    if owner is None:
        raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", "No such owner.")
    response = run_recall(owner, body.validated_data)
    # What the chat service got, in the owner's access log (memories/access_log.py).
    access_log.record_search(
        owner,
        None,
        body.validated_data["query"],
        response.data,
        source=access_log.AccessRecord.Source.SERVICE,
    )
    return response


@internal_view
def extract(request: Request) -> Response:
    """Queue extraction of durable facts from a conversation; answers 202 at once.

    Body: owner (username), session_id, phase (turn_end | pre_compaction),
    turns [{role, content, at?}]. The facts become proposed memories in the
    background (memories/extraction.py); the caller's turn never waits.
    """
    from django_q.tasks import async_task

    from memories import extraction, llm

    data = request.data
    if isinstance(request.auth, ApiToken):
        require_scope(request.auth, "propose")
        data = _for_token_owner(request.auth, data)
    if not llm.is_configured():
        raise ApiError(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "llm_not_configured",
            "Extraction needs an LLM: set TIMOTHY_LLM_BASE_URL (and TIMOTHY_LLM_MODEL, "
            "TIMOTHY_LLM_API_KEY) to an OpenAI-compatible chat completions API.",
        )
    try:
        job = extraction.validate_request(data)
    except extraction.InvalidExtractionRequest as error:
        raise ApiError(
            status.HTTP_400_BAD_REQUEST,
            "invalid_request",
            "The extraction request is not valid.",
            error.errors,
        )
    except extraction.UnknownOwner:
        raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", "No such owner.")
    turns = [{"role": t.role, "content": t.content, "at": t.at} for t in job["turns"]]
    task_id = async_task(
        "memories.tasks.extract_conversation",
        job["owner"].pk,
        job["session_id"],
        job["phase"],
        turns,
    )
    return Response({"status": "queued", "task_id": task_id}, status=status.HTTP_202_ACCEPTED)


def _for_token_owner(token: ApiToken, data: object) -> object:
    """The body with its owner set to the token's (when it names none); 403 when it
    names anyone else, known or not."""
    if not isinstance(data, dict):
        return data
    username = token.owner.get_username()
    named = data.get("owner")
    if named is None:
        return {**data, "owner": username}
    if named != username:
        raise ApiError(
            status.HTTP_403_FORBIDDEN,
            "other_owner",
            f"This token may send conversations to extraction for its owner {username!r} "
            "only; use the service token for other owners.",
        )
    return data
