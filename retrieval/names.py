"""Names that settings are checked against, importable before Django is set up.

timothy/settings.py validates ``TIMOTHY_DEFAULT_PIPELINE``,
``TIMOTHY_RETRIEVAL_PROFILE`` and ``TIMOTHY_EMBEDDING_PROVIDER`` with these, so
they cannot live in modules that need the app registry (retrieval/constants.py imports the models).
"""

PIPELINES = ("fusion", "freshness")
# The fusion pipeline's profiles (retrieval/constants.py defines each).
PROFILE_NAMES = ("default", "seed")
EMBEDDING_PROVIDERS = ("none", "openai", "local")
# How the local provider runs its model.
LOCAL_RUNTIMES = ("onnx", "torch")
# How the onnx runtime keeps the linear layers' weights (retrieval/onnx_model.py).
EMBEDDING_PRECISIONS = ("int8", "float32")
DEFAULT_EMBEDDING_PRECISION = "int8"
