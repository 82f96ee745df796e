"""What the service accepts of a request body's framing and coding, checked in
front of Django on both listeners.

Codings: a body must arrive as it is meant to be read. ``Transfer-Encoding``
may only say ``chunked`` (gunicorn decodes it); gunicorn would also accept
``gzip, chunked`` and hand the application the still-compressed bytes, so any
other transfer coding is a 400 ``unsupported_transfer_coding``. A request with
a ``Content-Encoding`` other than ``identity`` is a 415
``unsupported_content_coding``: nothing here decompresses bodies.

Chunked bodies without a Content-Length: Django reads exactly
``CONTENT_LENGTH`` bytes of a body, so without the header it sees an empty
body, and a client that streams its JSON would be answered as if it had sent
nothing. Gunicorn (``make run``) already decodes the chunks and says so with
``wsgi.input_terminated``; the middleware reads that decoded body, up to one
byte over ``MAX_BODY_BYTES``, and hands Django a body of known length, so the
usual limit (413) and parsing apply. A server that does not decode chunks
leaves the header in place, and the API answers 411.
"""

from __future__ import annotations

import io

from django.conf import settings

from timothy.http_errors import error_json

READ_CHUNK = 64 * 1024

ACCEPTED_TRANSFER_CODINGS = frozenset({"chunked", "identity"})
ACCEPTED_CONTENT_CODINGS = frozenset({"identity"})


def is_unsized_chunked(environ) -> bool:
    """A chunked body whose length nobody has told Django."""
    encoding = environ.get("HTTP_TRANSFER_ENCODING", "")
    return "chunked" in encoding.lower() and not environ.get("CONTENT_LENGTH")


def _codings(header: str) -> set[str]:
    return {coding.strip(" \t").lower() for coding in header.split(",") if coding.strip(" \t")}


def refused_coding(environ) -> tuple[str, str, str, str] | None:
    """(status line, code, message, header) for a body coding we cannot read, or None."""
    transfer = environ.get("HTTP_TRANSFER_ENCODING", "")
    unsupported = sorted(_codings(transfer) - ACCEPTED_TRANSFER_CODINGS)
    if unsupported:
        return (
            "400 Bad Request",
            "unsupported_transfer_coding",
            f"Transfer-Encoding {', '.join(unsupported)} is not supported; "
            "send the body as is, or chunked.",
            "Transfer-Encoding",
        )
    content = environ.get("HTTP_CONTENT_ENCODING", "")
    unsupported = sorted(_codings(content) - ACCEPTED_CONTENT_CODINGS)
    if unsupported:
        return (
            "415 Unsupported Media Type",
            "unsupported_content_coding",
            f"Content-Encoding {', '.join(unsupported)} is not supported; "
            "send the body uncompressed.",
            "Content-Encoding",
        )
    return None


class RequestBodyMiddleware:
    """WSGI middleware: refuse codings we cannot read; give a decoded chunked
    body its Content-Length."""

    def __init__(self, application) -> None:
        self.application = application

    def __call__(self, environ, start_response):
        refusal = refused_coding(environ)
        if refusal is not None:
            status, code, message, header = refusal
            body = error_json(code, message, {"header": header})
            headers = [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
            ]
            if header == "Content-Encoding":
                headers.append(("Accept-Encoding", "identity"))
            start_response(status, headers)
            return [body]
        if is_unsized_chunked(environ) and environ.get("wsgi.input_terminated"):
            body = _read_at_most(environ["wsgi.input"], settings.MAX_BODY_BYTES + 1)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.application(environ, start_response)


def _read_at_most(stream, limit: int) -> bytes:
    parts: list[bytes] = []
    remaining = limit
    while remaining > 0:
        part = stream.read(min(READ_CHUNK, remaining))
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)
