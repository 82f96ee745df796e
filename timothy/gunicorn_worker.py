"""gunicorn's threaded worker, answering gunicorn's own errors as JSON.

Some requests never reach Django: gunicorn refuses them while reading the
request line and headers (414 for an over-long line, 400 for a bad
Content-Length, Content-Length beside Transfer-Encoding, a NUL in a header, a
broken chunk...). gunicorn writes those answers with ``gunicorn.util.write_error``,
a small HTML page, and has no setting to change it. This worker keeps
gunicorn's own handling (which status for which fault, the warning, the access
log line) and replaces only that writer, in the worker process, so that every
answer of the service is the API's JSON envelope (timothy/http_errors.py).

Selected by ``worker_class`` in timothy/gunicorn_conf.py.
"""

from __future__ import annotations

from gunicorn import util
from gunicorn.http.errors import InvalidHeader, UnsupportedTransferCoding
from gunicorn.workers.gthread import ThreadWorker

from timothy.http_errors import error_json

# What gunicorn's statuses mean to an API client: (code, message).
ERRORS = {
    400: ("invalid_request", "The request is not valid HTTP/1.1 and was not read."),
    403: ("forbidden", "This request is not allowed from this address."),
    414: ("uri_too_long", "The request line (method, path and query) is too long."),
    417: ("expectation_failed", "Only 'Expect: 100-continue' is supported."),
    431: ("header_fields_too_large", "The request headers are too many or too long."),
}
SERVER_ERROR = ("internal_error", "Something went wrong on our side; it has been logged.")
# gunicorn's explanation is kept for the client, cut to this length.
MAX_PROBLEM_CHARS = 200


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """``gunicorn.util.write_error``, answering the JSON envelope instead of HTML."""
    code, message = ERRORS.get(status_int, SERVER_ERROR)
    details = {"problem": mesg[:MAX_PROBLEM_CHARS]} if mesg and status_int < 500 else None
    body = error_json(code, message, details)
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


class JsonErrorThreadWorker(ThreadWorker):
    def init_process(self) -> None:
        # This process serves only us: the swap reaches no one else.
        util.write_error = write_json_error
        super().init_process()

    def handle_error(self, req, client, addr, exc) -> None:
        if isinstance(exc, UnsupportedTransferCoding):
            # A transfer coding nobody knows: gunicorn answers 501 (as RFC 9112
            # allows), but the fault is the client's, and every coding we refuse
            # (gzip, deflate, ...) is a 400, so this one is too.
            exc = InvalidHeader("TRANSFER-ENCODING")
        super().handle_error(req, client, addr, exc)
