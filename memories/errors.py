"""One JSON error envelope for the API, whatever went wrong and wherever.

Every error the public and internal surfaces answer looks like
``{"error": {"code": "...", "message": "...", "details": ...}}`` (``details``
only when there is something structured to add). DRF views route their
exceptions through ``api_exception_handler``; anything that escapes a view (or
never reaches one: an unknown path) goes through the URLconfs' ``handler404`` /
``handler500`` below, which answer JSON on API paths and leave the owner's
pages to Django's usual HTML.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from memories.models import IllegalTransition, InvalidMemory
from timothy.http_errors import error_body

logger = logging.getLogger(__name__)

# Paths whose errors are answered as JSON even outside a DRF view: any API
# version (/v1, /v2, ...), the internal surface and the schema.
API_PATH = re.compile(r"^/(v[0-9]+|internal|api)(/|$)")

DEFAULT_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    411: "length_required",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
    429: "rate_limited",
    500: "internal_error",
    501: "not_implemented",
    503: "unavailable",
}

DATABASE_DOWN_MESSAGE = "The database is unavailable; try again shortly."


class ApiError(exceptions.APIException):
    """An error with its own code, message and optional details."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.message = message
        self.details = details
        self.headers = headers or {}


class PayloadTooLarge(ApiError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            "payload_too_large",
            f"The request body is larger than the limit of {limit} bytes.",
            {"limit_bytes": limit},
        )


class LengthRequired(ApiError):
    def __init__(self) -> None:
        super().__init__(
            status.HTTP_411_LENGTH_REQUIRED,
            "length_required",
            "This server cannot read a chunked request body; send a Content-Length header.",
        )


def error_response(
    status_code: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(error_body(code, message, details), status=status_code, headers=headers)


def is_database_down(exc: BaseException) -> bool:
    # OperationalError: cannot connect, connection lost, server shutting down.
    # InterfaceError: the connection object is already closed.
    return isinstance(exc, OperationalError | InterfaceError)


def _validation_message(detail: Any, prefix: str = "") -> str:
    """The first error of a (nested) validation detail, as one readable sentence."""
    if isinstance(detail, dict):
        for field, inner in detail.items():
            if isinstance(field, int):
                name = f"{prefix}[{field}]"
            elif field == "non_field_errors":
                name = prefix
            else:
                name = f"{prefix}.{field}" if prefix else str(field)
            return _validation_message(inner, name)
        return "The request is invalid."
    if isinstance(detail, list):
        for index, inner in enumerate(detail):
            if isinstance(inner, dict | list):
                return _validation_message(inner, f"{prefix}[{index}]")
            return _validation_message(inner, prefix)
        return "The request is invalid."
    return f"{prefix}: {detail}" if prefix else str(detail)


def _plain(detail: Any) -> Any:
    """DRF's ErrorDetail strings and lists as plain JSON values."""
    if isinstance(detail, dict):
        return {str(key): _plain(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_plain(value) for value in detail]
    return str(detail)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every API error as the JSON envelope."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("No such memory.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    if isinstance(exc, InvalidMemory):
        # A memory rule the request's fields did not catch first (memories/models.py).
        set_rollback()
        return error_response(
            status.HTTP_400_BAD_REQUEST,
            "invalid_request",
            f"{exc.field}: {exc.message}",
            {exc.field: [exc.message]},
        )

    if isinstance(exc, IllegalTransition):
        set_rollback()
        details: dict[str, Any] = {"id": exc.memory_id, "action": exc.action, "status": exc.status}
        if exc.head_id is not None:
            details["head_id"] = exc.head_id
        return error_response(status.HTTP_409_CONFLICT, "illegal_transition", exc.message, details)

    if is_database_down(exc):
        logger.warning("Database unavailable: %s", exc)
        return error_response(
            status.HTTP_503_SERVICE_UNAVAILABLE, "database_unavailable", DATABASE_DOWN_MESSAGE
        )

    if isinstance(exc, ApiError):
        set_rollback()
        return error_response(
            exc.status_code, exc.error_code, exc.message, exc.details, headers=exc.headers
        )

    if isinstance(exc, exceptions.APIException):
        set_rollback()
        headers: dict[str, str] = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(max(1, int(exc.wait + 0.999)))
        code = DEFAULT_CODES.get(exc.status_code, "error")
        details = None
        if isinstance(exc, exceptions.ValidationError):
            message = _validation_message(exc.detail)
            details = _plain(exc.detail)
        elif isinstance(exc, exceptions.ParseError):
            code = "malformed_json"
            message = str(exc.detail)
        else:
            message = str(exc.detail)
        if isinstance(exc, exceptions.Throttled):
            message = "Too many requests for this token; retry after the Retry-After seconds."
        return error_response(exc.status_code, code, message, details, headers=headers)

    # Anything else (a DatabaseError other than "down" included) is our bug, not
    # the client's: it reaches handler500, which logs it and answers JSON.
    return None


# --- Django-level handlers (URLconf handler404 / handler500 / handler400) ------


def is_api_path(path: str) -> bool:
    return API_PATH.match(path) is not None


def _json(status_code: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status_code)


def json_bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _json(400, "invalid_request", "The request could not be understood.")


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _json(404, "not_found", "There is nothing at this path.")


def json_server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this while handling the exception, so it is still current.
    exc = sys.exc_info()[1]
    if exc is not None and is_database_down(exc):
        return _json(503, "database_unavailable", DATABASE_DOWN_MESSAGE)
    return _json(500, "internal_error", "Something went wrong on our side; it has been logged.")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Public URLconf: JSON on API paths, Django's page elsewhere."""
    if is_api_path(request.path):
        return json_bad_request(request, exception)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request.path):
        return json_not_found(request, exception)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path):
        return json_server_error(request)
    exc = sys.exc_info()[1]
    if exc is not None and is_database_down(exc):
        # A page, not a stack trace or a generic 500: the owner should know it
        # is temporary. The template must not touch the database.
        return _database_down_page(request)
    return defaults.server_error(request)


def _database_down_page(request: HttpRequest) -> HttpResponse:
    body = loader.get_template("503.html").render()
    response = HttpResponse(body, status=503)
    response["Retry-After"] = "30"
    return response
