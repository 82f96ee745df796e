"""The API's JSON renderer: DRF's, but it never fails on text UTF-8 cannot hold."""

from __future__ import annotations

from typing import Any

from rest_framework import renderers


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


class JSONRenderer(renderers.JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            # A lone surrogate that slipped through to a body: send it escaped
            # rather than turn the answer into a 500.
            return super().render(encodable(data), accepted_media_type, renderer_context)
