"""The API's JSON error envelope, in one place and free of Django.

``{"error": {"code": "...", "message": "...", "details": ...}}``: memories/errors.py
answers every API error with it, and so do the layers below Django that write
their own answers (gunicorn's errors in timothy/gunicorn_worker.py, the WSGI
wrapper in timothy/request_body.py).
"""

from __future__ import annotations

import json
from typing import Any


def encodable(value: Any) -> Any:
    """``value`` with every string made UTF-8-encodable (keys of dicts included).

    Error messages quote what the client sent, and JSON may carry a lone
    surrogate ("\\ud800") that no UTF-8 body can hold: it is written as its escape,
    so the answer can always be sent.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {encodable(key): encodable(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(inner) for inner in value]
    return value


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": encodable(message)}
    if details is not None:
        error["details"] = encodable(details)
    return {"error": error}


def error_json(code: str, message: str, details: Any = None) -> bytes:
    return json.dumps(error_body(code, message, details)).encode("ascii")
