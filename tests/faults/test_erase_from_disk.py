"""Erase from disk, tested the way the leak was found: a unique marker in a memory's
content and entities, embedded, searched, superseded, exported, redacted for the
whole chain with an erase from disk asked for; once the memory's page says the
erase is complete, no file under the served instance's data folder holds the
marker, not the tables' free space, their indexes, nor the WAL."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.faults.conftest import SERVICE_TOKEN, api, signed_in
from tests.faults.test_embedding_catch_up import has_vector
from timothy.drill import HTTP_TIMEOUT, START_TIMEOUT, ServeProcess, service_env, wait_for

# A busy shared machine: the erase rewrites ten small tables and checkpoints twice.
ERASE_DEADLINE = 300


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (a file that vanished
    while we looked is no longer there to hold it)."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if not path.is_file():
                continue  # a socket, a FIFO
            try:
                data = path.read_bytes()
            except (FileNotFoundError, PermissionError, IsADirectoryError):
                continue
            if needle in data:
                found.append(str(path.relative_to(root)))
    return sorted(found)


def erase_state(service: ServeProcess, session, memory_id: int) -> str:
    page = session.get(f"{service.base}/memories/{memory_id}/", timeout=HTTP_TIMEOUT)
    if page.status_code == 503:
        # A read that waited behind a table being rewritten (docs/privacy.md).
        return "unavailable"
    assert page.status_code == 200, page.text[:300]
    match = re.search(r'data-disk-erase="(\w+)"', page.text)
    notice = re.search(r'data-disk-erase="\w+">(.*?)</div>', page.text, re.S)
    print(notice.group(1).strip()[:300] if notice else "")
    assert match, "the redacted memory's page says nothing of the erase from disk"
    return match.group(1)


@pytest.fixture
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def service(fake) -> Iterator[ServeProcess]:
    """The service, embedding through ``fake``, on a data folder outside pytest's
    temporary folders: a pytest started meanwhile (by anyone, as the same user)
    sets /tmp/pytest-of-<user> back to 0700, and the embedded server, running as
    its own user, then loses its data folder mid-test."""
    data_dir = Path(tempfile.mkdtemp(prefix="timothy-erase-test-"))
    process = ServeProcess(
        service_env(
            data_dir / "data",
            TIMOTHY_SERVICE_TOKEN=SERVICE_TOKEN,
            TIMOTHY_EMBEDDING_PROVIDER="openai",
            TIMOTHY_EMBEDDING_BASE_URL=fake.base_url,
            TIMOTHY_EMBEDDING_MODEL="text-embedding-3-small",
            TIMOTHY_EMBEDDING_API_KEY="sk-test",
            TIMOTHY_EMBEDDING_DIMENSIONS="384",
        )
    )
    try:
        process.wait_until_serving()
        yield process
    finally:
        try:
            process.stop()
        finally:
            process.kill()
            shutil.rmtree(data_dir, ignore_errors=True)


def test_no_file_of_the_data_folder_holds_a_redacted_text_once_the_erase_is_complete(service):
    client = api(service)
    # Letters and digits: one word to the full-text parser, never stemmed.
    marker = f"zq{uuid.uuid4().hex[:12]}x"
    entity = f"{marker}corp"

    written = client.post(
        service.base + "/v1/memories",
        json={
            "content": f"The locker code at {entity} is {marker}.",
            "type": "semantic",
            "mode": "remember",
            "entities": [entity],
        },
        timeout=HTTP_TIMEOUT,
    )
    assert written.status_code == 201, written.text
    first = written.json()["id"]
    wait_for(lambda: has_vector(service, first), START_TIMEOUT, "the memory's vector")

    # The query holds the marker too (the access log keeps a query's first words).
    found = client.post(
        service.base + "/v1/memories/search",
        json={"query": f"What is the locker code at {entity}? {marker}"},
        timeout=HTTP_TIMEOUT,
    )
    assert found.status_code == 200, found.text

    newer = client.post(
        f"{service.base}/v1/memories/{first}",
        json={
            "action": "supersede",
            "content": f"The locker code at {entity} is {marker} and a padlock.",
            "reason": "a padlock too",
        },
        timeout=HTTP_TIMEOUT,
    )
    assert newer.status_code == 201, newer.text
    head = newer.json()["id"]
    wait_for(lambda: has_vector(service, head), START_TIMEOUT, "the new version's vector")

    browser = signed_in(service)
    exported = browser.get(service.base + "/store/download/", timeout=HTTP_TIMEOUT)
    assert exported.status_code == 200 and marker in exported.text

    # Before: the text is in the database's files (the test can see it at all).
    assert files_holding(service.data_dir, marker.encode())

    redacted = client.post(
        f"{service.base}/v1/memories/{head}",
        json={
            "action": "redact",
            "chain": True,
            "reason": "a code, by mistake",
            "erase_from_disk": True,
        },
        timeout=HTTP_TIMEOUT,
    )
    assert redacted.status_code == 200, redacted.text
    assert marker not in redacted.text

    def complete() -> bool:
        state = erase_state(service, browser, first)
        assert state != "failed", service.output[-3000:]
        return state == "complete"

    try:
        wait_for(complete, ERASE_DEADLINE, "the page to say the erase is complete", pause=1)
    except AssertionError as gave_up:
        raise AssertionError(f"{gave_up}; serve's last lines:\n{service.output[-3000:]}")
    assert erase_state(service, browser, head) == "complete"
    polled = client.post(
        f"{service.base}/v1/memories/{head}",
        json={"action": "erase_from_disk"},
        timeout=HTTP_TIMEOUT,
    )
    assert polled.status_code == 200, polled.text
    assert polled.json()["disk_erase"]["state"] == "complete"
    assert "removed every segment" in polled.json()["disk_erase"]["outcome"]

    assert files_holding(service.data_dir, marker.encode()) == []
    assert files_holding(service.data_dir, marker.upper().encode()) == []
