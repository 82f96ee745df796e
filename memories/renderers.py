"""The API's JSON renderer: DRF's, but it never fails on text UTF-8 cannot hold."""

from __future__ import annotations

from rest_framework import renderers

from timothy.http_errors import encodable


class JSONRenderer(renderers.JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            # A lone surrogate that slipped through to a body: send it escaped
            # rather than turn the answer into a 500.
            return super().render(encodable(data), accepted_media_type, renderer_context)
