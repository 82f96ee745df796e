"""The access log on the owner's pages: the memory's deliveries, a page per token,
redaction and the daily pruning."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories import access_log, redaction
from memories.access_log import AccessRecord, preview_of
from memories.models import REDACTED_CONTENT, ApiToken
from memories.tasks import daily_maintenance
from tests.base import make_memory


def record(owner, token, ids, *, query="which seat on flights", at=None, source="api"):
    return AccessRecord.objects.create(
        owner=owner,
        token=token,
        source=source,
        memory_ids=ids,
        query_preview=preview_of(query),
        at=at or timezone.now(),
    )


@pytest.fixture
def laptop(alice):
    return ApiToken.issue(alice, name="laptop")[0]


def test_the_preview_is_the_first_words_within_80_characters():
    assert preview_of("  Which   seat\n do I like? ") == "Which seat do I like?"
    assert preview_of("one two three four five six seven eight nine") == (
        "one two three four five six seven eight…"
    )
    long = preview_of("x" * 200)
    assert len(long) == 80 and long.endswith("…")


def test_the_memory_page_says_which_token_received_it_how_often(alice_client, alice, laptop):
    seats = make_memory(alice, "Alice prefers an aisle seat.")
    other = make_memory(alice, "Alice was born in Leeds.")
    phone = ApiToken.issue(alice, name="phone")[0]
    now = timezone.now()
    for days in (3, 2, 1):
        record(alice, laptop, [seats.pk, other.pk], at=now - timedelta(days=days))
    record(alice, phone, [other.pk])
    record(alice, None, [seats.pk], source="service")

    response = alice_client.get(reverse("memory-detail", args=[seats.pk]))

    deliveries = response.context["deliveries"]
    assert [(d.token_name, d.times) for d in deliveries] == [
        ("laptop", 3),
        ("Chat service (internal)", 1),
    ]
    assert deliveries[0].last == now - timedelta(days=1)
    text = response.content.decode()
    assert "Sent to" in text and "laptop</bdi></a> 3 times, last" in text
    assert reverse("token-access", args=[laptop.pk]) in text
    assert "phone" not in text


def test_a_memory_never_sent_says_so(alice_client, alice):
    seats = make_memory(alice, "Alice prefers an aisle seat.")
    response = alice_client.get(reverse("memory-detail", args=[seats.pk]))
    assert response.context["deliveries"] == []
    assert "No search has delivered this memory" in response.content.decode()


def test_the_token_page_lists_its_searches_newest_first_in_pages(alice_client, alice, laptop):
    seats = make_memory(alice, "Alice prefers an aisle seat.")
    now = timezone.now()
    for n in range(30):
        record(alice, laptop, [seats.pk], query=f"query number {n}", at=now - timedelta(minutes=n))
    record(alice, ApiToken.issue(alice, name="phone")[0], [seats.pk], query="from the phone")

    first = alice_client.get(reverse("token-access", args=[laptop.pk]))
    second = alice_client.get(reverse("token-access", args=[laptop.pk]), {"page": 2})

    assert first.status_code == 200
    assert first.context["total"] == 30
    previews = [d.record.query_preview for d in first.context["deliveries"]]
    assert previews[:2] == ["query number 0", "query number 1"]
    assert len(previews) == 25
    assert len(second.context["deliveries"]) == 5
    text = first.content.decode()
    assert reverse("memory-detail", args=[seats.pk]) in text
    assert "Alice prefers an aisle seat." in text
    assert "from the phone" not in text


def test_the_tokens_page_links_each_token_to_its_page(alice_client, laptop):
    response = alice_client.get(reverse("tokens"))
    assert reverse("token-access", args=[laptop.pk]) in response.content.decode()


def test_another_owners_token_page_is_a_404(client, bob, laptop):
    client.force_login(bob)
    response = client.get(reverse("token-access", args=[laptop.pk]))
    assert response.status_code == 404


def test_redaction_scrubs_the_previews_that_delivered_or_quote_it(alice, laptop):
    secret = make_memory(alice, "Alice sees Dr Quinn on Tuesdays.")
    kept = make_memory(alice, "Alice prefers an aisle seat.")
    delivered = record(alice, laptop, [kept.pk, secret.pk], query="when is my appointment")
    quoting = record(alice, laptop, [kept.pk], query="Alice sees Dr Quinn on Tuesdays.")
    other = record(alice, laptop, [kept.pk], query="which seat")

    redaction.redact(secret, reason="private", actor=alice)

    delivered.refresh_from_db()
    quoting.refresh_from_db()
    other.refresh_from_db()
    assert delivered.query_preview == REDACTED_CONTENT
    assert delivered.memory_ids == [kept.pk, secret.pk]
    assert quoting.query_preview == REDACTED_CONTENT
    assert other.query_preview == "which seat"


def test_the_daily_job_prunes_records_older_than_the_setting(settings, alice, laptop):
    settings.ACCESS_LOG_DAYS = 30
    now = timezone.now()
    old = record(alice, laptop, [], at=now - timedelta(days=31))
    recent = record(alice, laptop, [], at=now - timedelta(days=29))

    daily_maintenance()

    assert list(AccessRecord.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not AccessRecord.objects.filter(pk=old.pk).exists()
    assert access_log.prune() == 0
