"""The internal surface, served only by the internal listener (timothy/internal_urls.py).

    POST /internal/v1/retrieve   what the chat side calls per user message: the
                                 search body plus "owner" (a username); the
                                 same answer as POST /v1/memories/search
    POST /internal/v1/extract    extraction from a conversation (501 until the
                                 extraction work lands)

Authenticated with ``Authorization: Bearer <TIMOTHY_SERVICE_TOKEN>``, compared
in constant time. With no service token configured every call is refused with
503 ``service_token_not_configured``: a listener nobody configured must not
answer anyone. There is no per-token rate limit here; the caller is our own
chat service.
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

from memories.api import LimitedJSONParser, check_body_size, run_recall
from memories.errors import ApiError, error_response
from memories.serializers import InternalRetrieveSerializer


class ServiceCaller:
    """request.user on the internal surface: the chat service, not an owner."""

    is_authenticated = True
    username = "service"


class ServiceTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        configured = settings.SERVICE_TOKEN
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
        return request.auth == "service"


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
    return run_recall(owner, body.validated_data)


@internal_view
def extract(request: Request) -> Response:
    """Extract memories from a conversation (the extraction work replaces this body)."""
    return error_response(
        status.HTTP_501_NOT_IMPLEMENTED,
        "not_implemented",
        "Extraction is not available yet on this server.",
    )
