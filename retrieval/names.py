"""Names that settings are checked against, importable before Django is set up.

timothy/settings.py validates ``TIMOTHY_DEFAULT_PIPELINE`` and
``TIMOTHY_EMBEDDING_PROVIDER`` with these, so they cannot live in modules that
need the app registry (retrieval/constants.py imports the models).
"""

PIPELINES = ("fusion", "freshness")
EMBEDDING_PROVIDERS = ("none", "openai", "local")
