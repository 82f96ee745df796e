"""The access log through the real surfaces: a search by a token, a retrieve by
the chat service, and (not logged) the owner's inspector."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories import access_log
from memories.access_log import AccessRecord
from memories.models import ApiToken
from tests.base import make_memory

SEARCH = "/v1/memories/search"
SERVICE_TOKEN = "service-secret-for-access-log-tests"


@pytest.fixture
def service_api(settings, make_api):
    """The internal URLconf on the live server, as the internal listener serves it."""
    settings.ROOT_URLCONF = "timothy.internal_urls"
    settings.SERVICE_TOKEN = SERVICE_TOKEN
    return make_api(SERVICE_TOKEN)


def test_a_search_records_which_token_received_which_memories(make_api, alice, bob):
    seats = make_memory(alice, "Alice prefers an aisle seat on long-haul flights.")
    make_memory(bob, "Bob prefers a window seat on long-haul flights.")
    token, raw = ApiToken.issue(alice, name="laptop")
    query = "Which seat do I like on long flights when I travel to Lisbon next month?"

    response = make_api(raw).post(SEARCH, {"query": query})

    assert response.status_code == 200, response.text
    assert [m["id"] for m in response.json()["memories"]] == [seats.pk]
    record = AccessRecord.objects.get()
    assert record.owner == alice
    assert record.token == token
    assert record.source == AccessRecord.Source.API
    assert record.memory_ids == [seats.pk]
    # The first eight words, no more.
    assert record.query_preview == "Which seat do I like on long flights…"


def test_a_search_that_finds_nothing_is_recorded_with_no_memories(alice_api, alice):
    response = alice_api.post(SEARCH, {"query": "zebra"})
    assert response.status_code == 200, response.text
    record = AccessRecord.objects.get()
    assert record.memory_ids == []
    assert record.query_preview == "zebra"


def test_a_refused_search_records_nothing(alice_api):
    response = alice_api.post(SEARCH, {"query": ""})
    assert response.status_code == 400
    assert not AccessRecord.objects.exists()


def test_an_internal_retrieve_is_recorded_as_the_chat_service(service_api, alice):
    mine = make_memory(alice, "Alice prefers an aisle seat on long flights.")
    response = service_api.post(
        "/internal/v1/retrieve", {"owner": "alice", "query": "Which seat on long flights?"}
    )
    assert response.status_code == 200, response.text
    record = AccessRecord.objects.get()
    assert (record.owner, record.token, record.source) == (alice, None, "service")
    assert record.memory_ids == [mine.pk]


def test_the_inspector_is_not_logged(client, alice):
    make_memory(alice, "Alice prefers an aisle seat on long flights.")
    client.force_login(alice)
    response = client.post(
        reverse("inspect"),
        {"message": "Which seat on long flights?", "pipeline": "fusion", "budget": 1024},
    )
    assert response.status_code == 200
    assert response.context["result"].memories
    assert not AccessRecord.objects.exists()


def test_in_production_the_record_is_written_after_the_answer_off_the_turn(
    settings, alice_api, alice
):
    settings.STAMP_IN_BACKGROUND = True
    seats = make_memory(alice, "Alice prefers an aisle seat on long-haul flights.")
    response = alice_api.post(SEARCH, {"query": "Which seat on long flights?"})
    assert response.status_code == 200, response.text
    access_log.drain()
    assert list(AccessRecord.objects.values_list("memory_ids", flat=True)) == [[seats.pk]]
