"""Request bodies sent with ``Transfer-Encoding: chunked`` and no Content-Length.

Django reads exactly ``CONTENT_LENGTH`` bytes of a body, so without the header
it sees an empty body, and a client that streams its JSON would be answered as
if it had sent nothing. Gunicorn (``make run``) already decodes the chunks and
says so with ``wsgi.input_terminated``; this wrapper reads that decoded body,
up to one byte over ``MAX_BODY_BYTES``, and hands Django a body of known
length, so the usual limit (413) and parsing apply. A server that does not
decode chunks leaves the header in place, and the API answers 411.
"""

from __future__ import annotations

import io

from django.conf import settings

READ_CHUNK = 64 * 1024


def is_unsized_chunked(environ) -> bool:
    """A chunked body whose length nobody has told Django."""
    encoding = environ.get("HTTP_TRANSFER_ENCODING", "")
    return "chunked" in encoding.lower() and not environ.get("CONTENT_LENGTH")


class ChunkedBodyMiddleware:
    """WSGI middleware: give a decoded chunked body its Content-Length."""

    def __init__(self, application) -> None:
        self.application = application

    def __call__(self, environ, start_response):
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
