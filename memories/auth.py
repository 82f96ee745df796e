"""Bearer-token authentication for the public API."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from memories.tokens import ApiToken


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw.strip():
            raise exceptions.AuthenticationFailed("Use an 'Authorization: Bearer <token>' header.")
        token = ApiToken.authenticate(raw.strip())
        if token is None:
            raise exceptions.AuthenticationFailed("The token is unknown or has been revoked.")
        return token.owner, token

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="timothy"'
