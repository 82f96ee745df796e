"""Content-Security-Policy on every answer of the public listener.

The pages load only the service's own files: one stylesheet, one script, an
SVG icon, no inline script or style (bar widths are classes, the API docs page
loads its start-up script from its own URL). So the policy allows exactly
that: whatever got into a page (a memory's text is always escaped, but this is
the second wall) could not run a script, load a resource from elsewhere, post
a form elsewhere, or put the page in a frame. ``data:`` images are allowed for
the icons the Swagger UI of ``/api/docs/`` draws with them.

A small middleware rather than django-csp: one fixed policy, no nonces, no
per-view changes (docs/security.md).
"""

from __future__ import annotations

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
