"""Download and upload of the whole store on /store/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from memories import store_views
from memories.io import export_lines
from memories.models import Memory
from tests.base import make_memory
from tests.pages.conftest import flashes


@pytest.fixture(autouse=True)
def upload_folder(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path / store_views.UPLOAD_FOLDER


def jsonl(*records) -> bytes:
    return "".join(
        (record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records
    ).encode()


GOOD_AND_BAD = jsonl(
    {"id": 1, "content": "Alice lives in Leeds.", "type": "semantic"},
    {
        "id": 2,
        "content": "Alice likes tea.",
        "type": "preference",
        "status": "superseded",
        "superseded_by": 3,
    },
    {"id": 3, "content": "Alice likes green tea.", "type": "preference"},
    "not json at all",
    {"content": "No type here."},
)


def upload(client, data: bytes, name: str = "memories.jsonl"):
    return client.post(
        reverse("store-upload"), {"file": SimpleUploadedFile(name, data, "application/jsonl")}
    )


def test_the_download_is_what_export_memories_writes(alice_client, alice, bob):
    make_memory(alice, "Alice lives in Leeds.")
    make_memory(alice, "Alice likes tea.", "preference", status=Memory.Status.PROPOSED)
    make_memory(bob, "Bob lives in York.")

    response = alice_client.get(reverse("store-download"))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/jsonl")
    assert response["Content-Disposition"].startswith('attachment; filename="timothy-alice-')
    body = b"".join(response.streaming_content).decode()
    assert body == "".join(line + "\n" for line in export_lines(alice))
    assert "Bob" not in body and body.count("\n") == 2


def test_the_store_page_offers_both(alice_client, alice):
    make_memory(alice)
    response = alice_client.get(reverse("store"))
    text = response.content.decode()
    assert reverse("store-download") in text
    assert 'enctype="multipart/form-data"' in text
    assert "All 1 memory you hold" in text


def test_an_upload_previews_without_writing_then_confirm_imports(alice_client, alice):
    make_memory(alice, "Alice lives in Leeds.")

    preview = upload(alice_client, GOOD_AND_BAD)

    assert preview.status_code == 200
    assert Memory.objects.filter(owner=alice).count() == 1
    summary = preview.context["preview"]
    assert (summary.good, summary.bad, summary.repeats, summary.chained) == (3, 2, 1, 1)
    assert [item.line for item in summary.first] == [1, 2, 3]
    assert [(e.line, e.reason.split(" (")[0]) for e in summary.errors] == [
        (4, "not JSON"),
        (5, "missing type"),
    ]
    text = preview.content.decode()
    assert "Line 4: not JSON" in text
    assert "1</strong> of them repeats the text of a memory you already hold" in text
    assert "Import 3 memories" in text

    done = alice_client.post(
        reverse("store-import"), {"upload": preview.context["upload_id"]}, follow=True
    )

    assert done.redirect_chain[-1][0] == reverse("memory-list")
    assert (
        "Imported 3 memories from memories.jsonl; 2 lines were left out (they could not be read)"
        in (" ".join(flashes(done)))
    )
    contents = set(Memory.objects.filter(owner=alice).values_list("content", flat=True))
    assert {"Alice likes tea.", "Alice likes green tea."} <= contents
    tea = Memory.objects.get(owner=alice, content="Alice likes tea.")
    assert tea.superseded_by.content == "Alice likes green tea."
    # The file is gone, and the same confirmation cannot import twice.
    again = alice_client.post(
        reverse("store-import"), {"upload": preview.context["upload_id"]}, follow=True
    )
    assert "no longer waiting" in " ".join(flashes(again))
    assert Memory.objects.filter(owner=alice).count() == 4


def test_a_file_with_no_good_line_offers_no_import(alice_client):
    response = upload(alice_client, jsonl("nope", {"content": ""}))
    assert response.context["preview"].good == 0
    text = response.content.decode()
    assert "No line of this file can be imported" in text
    assert reverse("store-import") not in text


def test_cancel_discards_the_upload(alice_client, alice, upload_folder):
    preview = upload(alice_client, GOOD_AND_BAD)
    assert len(list(upload_folder.iterdir())) == 1
    alice_client.post(reverse("store-cancel"))
    assert list(upload_folder.iterdir()) == []
    response = alice_client.post(reverse("store-import"), {"upload": preview.context["upload_id"]})
    assert response.status_code == 302
    assert not Memory.objects.filter(owner=alice).exists()


def test_another_owner_cannot_import_or_see_the_upload(alice_client, alice, bob):
    preview = upload(alice_client, GOOD_AND_BAD)
    upload_id = preview.context["upload_id"]
    bobs = Client()
    bobs.force_login(bob)

    response = bobs.post(reverse("store-import"), {"upload": upload_id}, follow=True)

    assert "no longer waiting" in " ".join(flashes(response))
    assert not Memory.objects.filter(owner=bob).exists()
    assert not Memory.objects.filter(owner=alice).exists()
    # Bob's download holds nothing of Alice's upload or store.
    assert b"".join(bobs.get(reverse("store-download")).streaming_content) == b""


def test_a_file_over_the_limit_is_refused_with_a_sentence(settings, alice_client, upload_folder):
    settings.MAX_UPLOAD_BYTES = 2048
    response = upload(alice_client, jsonl({"content": "x" * 3000, "type": "semantic"}))
    assert response.status_code == 413
    assert "The file is larger than 2 KB" in response.content.decode()
    assert not upload_folder.exists() or list(upload_folder.iterdir()) == []


def test_a_declared_body_far_over_the_limit_is_refused_unread(settings, alice_client):
    settings.MAX_UPLOAD_BYTES = 2048
    response = upload(alice_client, b"x" * 200_000)
    assert response.status_code == 413
    assert "The file is larger than 2 KB" in response.content.decode()


def test_an_empty_upload_or_none_is_a_sentence(alice_client):
    assert "Choose a file" in alice_client.post(reverse("store-upload")).content.decode()
    empty = upload(alice_client, b"")
    assert empty.status_code == 400
    assert "The file is empty" in empty.content.decode()


def test_the_upload_needs_the_csrf_token(csrf_client, alice):
    response = upload(csrf_client, GOOD_AND_BAD)
    assert response.status_code == 403
    assert not Memory.objects.filter(owner=alice).exists()


def test_the_pages_need_a_signed_in_owner(client):
    for name in ("store", "store-download"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and "/login/" in response["Location"]
    response = upload(client, GOOD_AND_BAD)
    assert response.status_code == 302


def test_a_stale_upload_is_swept_by_the_next(alice_client, upload_folder):
    upload_folder.mkdir(parents=True)
    stale = upload_folder / f"999-{'a' * 32}.jsonl"
    stale.write_text("{}\n")
    os.utime(stale, (0, 0))
    upload(alice_client, GOOD_AND_BAD)
    assert not stale.exists()
    assert len(list(Path(upload_folder).iterdir())) == 1
