"""Extractions the service could not take, kept on disk until it answers again.

One JSON-lines file per service and owner, in the client's queue folder
(``Memory(queue_dir=...)``, else ``TIMOTHY_CLIENT_QUEUE_DIR``, else
``$XDG_CACHE_HOME/timothy-client`` or ``~/.cache/timothy-client``). Each line
is one extraction request: its Idempotency-Key, when it was queued, and the
body as it would have been sent. The file is bounded by entries and bytes;
past either bound the oldest entries are dropped, with a warning.

Several processes may share a file (two chats on one machine): every change
is a read, a rewrite to a temporary file and a rename, under an exclusive
``flock`` of ``<file>.lock``; only one process sends from a file at a time
(a non-blocking ``flock`` of ``<file>.send``). Where ``fcntl`` is missing
(Windows) the locks are skipped and one process per file is assumed.

The file holds the conversation's words: it is made readable by its owner only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("timothy_client")

DEFAULT_MAX_ENTRIES = 500
DEFAULT_MAX_BYTES = 5 * 1024 * 1024


def default_queue_dir() -> Path:
    """Where queued extractions are kept when no folder is given."""
    configured = os.environ.get("TIMOTHY_CLIENT_QUEUE_DIR")
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "timothy-client"


class ExtractionQueue:
    """A bounded, on-disk, first-in first-out list of extraction requests."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        service: str,
        owner: str,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be at least 1")
        self.folder = Path(folder)
        # One file per service and owner: a queue never reaches another service.
        name = hashlib.sha256(f"{service}\n{owner}".encode()).hexdigest()[:16]
        self.path = self.folder / f"extract-{name}.jsonl"
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    # -- reading and changing ------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """The queued requests, oldest first."""
        if not self.path.exists():  # nothing was ever queued here: touch nothing
            return []
        with self._locked():
            return self._read()

    def __len__(self) -> int:
        return len(self.entries())

    def append(self, key: str, body: dict[str, Any]) -> int:
        """Queue one request; returns how many older ones were dropped to make room."""
        entry = {"key": key, "queued_at": datetime.now(UTC).isoformat(), "body": body}
        size = len(_line(entry).encode())
        if size > self.max_bytes:
            logger.warning(
                "Extraction dropped: %d bytes, more than the whole queue may hold (%d)",
                size,
                self.max_bytes,
            )
            return 0
        with self._locked():
            entries = [*self._read(), entry]
            dropped = 0
            while len(entries) > self.max_entries or _size(entries) > self.max_bytes:
                entries.pop(0)
                dropped += 1
            self._write(entries)
        if dropped:
            logger.warning(
                "Extraction queue full (%d entries, %d bytes at most): dropped the %d oldest",
                self.max_entries,
                self.max_bytes,
                dropped,
            )
        return dropped

    def remove(self, key: str) -> None:
        """Take the request with ``key`` off the queue (it was sent)."""
        with self._locked():
            entries = self._read()
            kept = [entry for entry in entries if entry.get("key") != key]
            if len(kept) != len(entries):
                self._write(kept)

    @contextlib.contextmanager
    def sending(self) -> Iterator[bool]:
        """Yields True when this process may send from the queue (no other one is)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if fcntl is None:
            yield True
            return
        with open(self._side_file(".send"), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- the file --------------------------------------------------------------

    def _side_file(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name + suffix)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if fcntl is None:
            yield
            return
        with open(self._side_file(".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or not isinstance(entry.get("body"), dict):
                    raise ValueError("not a queued request")
            except ValueError as error:
                logger.warning(
                    "Extraction queue %s: line %d skipped (%s)", self.path, number, error
                )
                continue
            entries.append(entry)
        return entries

    def _write(self, entries: list[dict[str, Any]]) -> None:
        if not entries:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        descriptor, temporary = tempfile.mkstemp(dir=self.folder, prefix=".extract-", text=True)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.writelines(_line(entry) for entry in entries)
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise


def _line(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"


def _size(entries: list[dict[str, Any]]) -> int:
    return sum(len(_line(entry).encode()) for entry in entries)
