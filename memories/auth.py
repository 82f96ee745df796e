"""Bearer-token authentication for the public API, and the token's scopes and pause."""

from __future__ import annotations

from rest_framework import authentication, exceptions, status

from memories.api_tokens import SCOPES, ApiToken

# What each scope lets a token do, for the 403 sentence.
SCOPE_DOES = {
    "read": "read memories (list, chain, search)",
    "propose": "propose memories",
    "write": "remember or act on memories",
}


def paused_error(token: ApiToken) -> exceptions.APIException:
    # Imported here: memories.errors imports rest_framework.views, which loads
    # this module (DEFAULT_AUTHENTICATION_CLASSES) while it starts.
    from memories.errors import ApiError

    return ApiError(
        status.HTTP_403_FORBIDDEN,
        "token_paused",
        f"The token “{token.name or token.prefix}” is paused: its owner can resume it on "
        "the Tokens page.",
    )


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
        if token.is_paused:
            raise paused_error(token)
        return token.owner, token

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="timothy"'


def require_scope(token: object, scope: str) -> None:
    """403 ``missing_scope`` unless ``token`` (an ApiToken) has ``scope``.

    Anything that is not an ApiToken (the internal surface's service caller)
    is not limited by scopes.
    """
    assert scope in SCOPES, scope
    if not isinstance(token, ApiToken) or token.allows(scope):
        return
    from memories.errors import ApiError

    has = ", ".join(token.scopes) or "none"
    raise ApiError(
        status.HTTP_403_FORBIDDEN,
        "missing_scope",
        f"This token may not {SCOPE_DOES[scope]}: that needs the {scope} scope, and it has "
        f"{has}. Create a token with the {scope} scope on the Tokens page.",
        {"required_scope": scope, "token_scopes": list(token.scopes)},
    )
