"""Settings of the internal listener: the same service, only the internal URLconf.

The internal routes live in their own URLconf, so nothing on the public
listener can ever reach them, and nothing of the public API is served here.
"""

from timothy.settings import *  # noqa: F403
from timothy.settings import INTERNAL_URLCONF

ROOT_URLCONF = INTERNAL_URLCONF
