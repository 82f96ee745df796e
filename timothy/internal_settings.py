"""Settings of the internal listener: the same service, only the internal URLconf.

The internal routes live in their own URLconf, so nothing on the public
listener can ever reach them, and nothing of the public API is served here.
The listener serves its two routes and nothing else: no static files (the
public listener's WhiteNoise is left out); any other path is a JSON 404.
"""

from timothy.settings import *  # noqa: F403
from timothy.settings import INTERNAL_URLCONF, MIDDLEWARE, SILENCED_SYSTEM_CHECKS

ROOT_URLCONF = INTERNAL_URLCONF

MIDDLEWARE = [name for name in MIDDLEWARE if not name.startswith("whitenoise.")]
# A missing slash is a 404 like any other path, never a redirect.
APPEND_SLASH = False
# The chat service calls this listener over plain HTTP on its own network.
SECURE_SSL_REDIRECT = False
SILENCED_SYSTEM_CHECKS = [
    *SILENCED_SYSTEM_CHECKS,
    "security.W008",  # no HTTPS redirect: see above
    # The OpenAPI schema documents the public surface only; drf-spectacular's
    # deploy check, run against this URLconf, finds nothing to document here.
    "drf_spectacular.W001",
    "drf_spectacular.W002",
]
