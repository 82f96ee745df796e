"""Settings of the test suite (pytest-django's DJANGO_SETTINGS_MODULE, pyproject.toml).

The service's settings, with every difference the tests need stated here
rather than switched on inside production code.
"""

from retrieval.names import EMBEDDING_PROVIDERS
from timothy.env import envchoice
from timothy.settings import *  # noqa: F403
from timothy.settings import Q_CLUSTER

# Fast password hashing: the suite signs in thousands of times.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# No embedding model unless a test asks for one (tests/fakes/ serves a fake).
EMBEDDING_PROVIDER = envchoice("TIMOTHY_EMBEDDING_PROVIDER", "none", EMBEDDING_PROVIDERS)
# Background tasks run at once, in the test's process.
Q_CLUSTER = {**Q_CLUSTER, "sync": True}
# The suite drops its database at the end, which a recall thread's idle
# connection would block: threads close theirs after each piece of work.
KEEP_THREAD_CONNECTIONS = False
# A test reads last_retrieved_at right after recall: stamp at once.
STAMP_IN_BACKGROUND = False
