"""What the service's logs say about a request: its method, path and the names
of its query parameters, never their values.

A query string carries the owner's words (``/v1/memories?q=…&entity=…``, the
memory list's and the admin's search boxes), and a text the owner redacted must
not live on in a log. gunicorn's access log (``make run`` writes it to the
console) is written through ``QueryMaskingLogger`` (``logger_class`` in
timothy/gunicorn_conf.py), so every format atom that could hold a query (the
request line ``%(r)s``, ``%(q)s``, the Referer ``%(f)s``, and the headers and
environ variables a custom format can name) has its values replaced by
``MASK``: ``"GET /v1/memories?q=***&entity=*** HTTP/1.1" 200``. gunicorn's
warnings about requests it refuses quote the request line and get the same.
``manage.py runserver``'s request log goes through ``MaskQueryValues``
(settings.LOGGING). Django's own request warnings (``Not Found: /path``) name
only the path.
"""

from __future__ import annotations

import logging
import re

from gunicorn.glogging import Logger

MASK = "***"
# A parameter name shown as it is; any other name (percent-encoded, spaced,
# long: it may be text) is masked like a value.
_PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-\[\]]{0,39}")
# A query inside a message: from "?" to the end of the request target.
_QUERY_IN_TEXT = re.compile(r"\?[^\s'\"]*")
# A quoted string in a message (gunicorn quotes what it could not read with repr()).
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
# A request line: method, target (which may hold spaces when it is broken), version.
_REQUEST_LINE = re.compile(r"(\S+) (.*) (HTTP/\S*)", re.DOTALL)
# A quoted token (a header name, an HTTP version) is kept; anything else quoted is masked.
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&*+.^_`|~/:\-]{1,64}")
# gunicorn's messages about a request that quote what the client sent.
_REQUEST_MESSAGES = ("Invalid request from", "Error handling request")


def mask_query(query: str) -> str:
    """``query`` (without its "?") with every value, and every name that does not
    look like a parameter name, replaced by MASK; an empty value stays empty."""
    if not query:
        return query
    parts = []
    for part in query.split("&"):
        name, equals, value = part.partition("=")
        if not equals:
            parts.append(MASK if part else "")
            continue
        shown = name if _PARAMETER_NAME.fullmatch(name) else MASK
        parts.append(f"{shown}={MASK if value else ''}")
    return "&".join(parts)


def mask_target(target: str) -> str:
    """A request target or URL with its query masked (``mask_query``)."""
    path, question, query = target.partition("?")
    return f"{path}?{mask_query(query)}" if question else path


def mask_message(text: str) -> str:
    """A log message quoting a request, with nothing of its query's values left:
    a quoted request line keeps its method, path and version; any other quoted
    string that is not a single token is masked; a query elsewhere is masked."""

    def quoted(match: re.Match) -> str:
        quote, inner = match.group()[0], match.group()[1:-1]
        line = _REQUEST_LINE.fullmatch(inner)
        if line:
            method, target, version = line.groups()
            return f"{quote}{method} {_mask_broken_target(target)} {version}{quote}"
        if not inner or _TOKEN.fullmatch(inner):
            return match.group()
        return f"{quote}{_mask_broken_target(inner) if inner.startswith('/') else MASK}{quote}"

    text = _QUOTED.sub(quoted, text)
    return _QUERY_IN_TEXT.sub(lambda query: "?" + mask_query(query.group()[1:]), text)


def _mask_broken_target(target: str) -> str:
    """A target that may hold spaces (gunicorn refused it): everything after "?"
    is the query; a space in the path masks the rest of it."""
    path, question, query = target.partition("?")
    if " " in path:
        path = path.split(" ", 1)[0] + " " + MASK
    return f"{path}?{mask_query(query.replace(' ', '+'))}" if question else path


class QueryMaskingLogger(Logger):
    """gunicorn's logger, writing no value of a request's query string."""

    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        raw_uri = environ.get("RAW_URI", "")
        atoms["r"] = " ".join(
            (
                environ.get("REQUEST_METHOD") or "-",
                mask_target(raw_uri),
                environ.get("SERVER_PROTOCOL") or "-",
            )
        )
        atoms["q"] = mask_query(environ.get("QUERY_STRING") or "")
        atoms["f"] = mask_target(environ.get("HTTP_REFERER") or "-")
        for key in ("{raw_uri}e", "{http_referer}e", "{referer}i", "{location}o"):
            if key in atoms:
                atoms[key] = mask_target(str(atoms[key]))
        if "{query_string}e" in atoms:
            atoms["{query_string}e"] = mask_query(str(atoms["{query_string}e"]))
        return atoms

    def _masked(self, msg, args) -> tuple:
        text = str(msg)
        if not text.startswith(_REQUEST_MESSAGES):
            return msg, args
        if args:
            text = text % args
        return mask_message(text), ()

    def warning(self, msg, *args, **kwargs) -> None:
        msg, args = self._masked(msg, args)
        super().warning(msg, *args, **kwargs)

    def critical(self, msg, *args, **kwargs) -> None:
        msg, args = self._masked(msg, args)
        super().critical(msg, *args, **kwargs)

    def error(self, msg, *args, **kwargs) -> None:
        msg, args = self._masked(msg, args)
        super().error(msg, *args, **kwargs)

    def exception(self, msg, *args, **kwargs) -> None:
        msg, args = self._masked(msg, args)
        super().exception(msg, *args, **kwargs)


class MaskQueryValues(logging.Filter):
    """A logging filter masking query values in a request log record
    (``django.server``: ``"GET /memories/?q=*** HTTP/1.1" 200 1234``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_message(record.getMessage())
        record.args = None
        return True
