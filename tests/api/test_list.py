from datetime import timedelta

import pytest
from django.utils import timezone

from memories.api import list_memories
from memories.models import Memory
from tests.base import make_memory, stamp


def ids(response) -> list[int]:
    assert response.status_code == 200, response.text
    return [memory["id"] for memory in response.json()["memories"]]


def test_it_lists_active_memories_newest_first(alice_api, alice):
    now = timezone.now()
    old = make_memory(alice, "old", created_at=now - timedelta(days=2))
    new = make_memory(alice, "new", created_at=now - timedelta(days=1))
    make_memory(alice, "staged", status=Memory.Status.PROPOSED, created_at=now)
    assert ids(alice_api.get("/v1/memories")) == [new.pk, old.pk]


@pytest.mark.parametrize("status", ["proposed", "rejected", "archived"])
def test_it_filters_by_status(alice_api, alice, status):
    make_memory(alice, "active one")
    wanted = make_memory(alice, "the one", status=status)
    assert ids(alice_api.get("/v1/memories", params={"status": status})) == [wanted.pk]


def test_it_lists_every_status_with_all(alice_api, alice):
    first = make_memory(alice, "a")
    second = make_memory(alice, "b", status=Memory.Status.PROPOSED)
    assert set(ids(alice_api.get("/v1/memories", params={"status": "all"}))) == {
        first.pk,
        second.pk,
    }


def test_it_filters_by_type(alice_api, alice):
    make_memory(alice, "fact", type=Memory.Type.SEMANTIC)
    wanted = make_memory(alice, "likes tea", type=Memory.Type.PREFERENCE)
    assert ids(alice_api.get("/v1/memories", params={"type": "preference"})) == [wanted.pk]


def test_it_filters_by_entity_ignoring_case(alice_api, alice):
    wanted = make_memory(alice, "Bob is Alice's brother.", entities=["Bob", "Alice"])
    make_memory(alice, "Carol is a colleague.", entities=["Carol"])
    make_memory(alice, "Bobby is a dog.", entities=["Bobby"])
    assert ids(alice_api.get("/v1/memories", params={"entity": "bOB"})) == [wanted.pk]


def test_it_filters_by_full_text(alice_api, alice):
    wanted = make_memory(alice, "Alice runs marathons every spring.")
    make_memory(alice, "Alice dislikes coriander.")
    assert ids(alice_api.get("/v1/memories", params={"q": "marathon"})) == [wanted.pk]


def test_it_searches_text_ignoring_accents_as_the_pages_do(alice_api, alice):
    wanted = make_memory(alice, "Loves pastéis de nata.")
    make_memory(alice, "Alice dislikes coriander.")
    assert ids(alice_api.get("/v1/memories", params={"q": "PASTEIS"})) == [wanted.pk]
    assert ids(alice_api.get("/v1/memories", params={"q": "nata -pastéis"})) == []


def test_it_filters_by_session(alice_api, alice):
    wanted = make_memory(alice, "from chat 7", session_id="chat-7")
    make_memory(alice, "from chat 8", session_id="chat-8")
    assert ids(alice_api.get("/v1/memories", params={"session_id": "chat-7"})) == [wanted.pk]


def test_it_pages_with_a_cursor_without_gaps_or_repeats(alice_api, alice):
    moment = timezone.now()
    # Equal timestamps too: the id breaks ties.
    created = [
        make_memory(alice, f"memory {n}", created_at=moment - timedelta(minutes=n // 2))
        for n in range(7)
    ]
    expected = [m.pk for m in sorted(created, key=lambda m: (m.created_at, m.pk), reverse=True)]
    seen: list[int] = []
    params = {"limit": 3}
    while True:
        response = alice_api.get("/v1/memories", params=params)
        seen += ids(response)
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
        params = {"limit": 3, "cursor": cursor}
    assert seen == expected


@pytest.mark.parametrize(
    "params",
    [
        {"status": "deleted"},
        {"type": "gossip"},
        {"limit": "0"},
        {"limit": "1000"},
        {"limit": "ten"},
        {"cursor": "not-a-cursor"},
        {"cursor": "MjAyNi0wMS0wMQ"},
        {"colour": "red"},
        {"entity": "a\u0000b"},
    ],
)
def test_it_rejects_bad_filters(alice_api, params):
    response = alice_api.get("/v1/memories", params=params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"invalid_request", "invalid_cursor"}


def test_it_filters_by_entity_ignoring_spacing(alice_api, alice):
    wanted = make_memory(alice, "Lives in Berlin Mitte.", entities=["Berlin Mitte"])
    response = alice_api.get("/v1/memories", params={"entity": "  berlin   mitte "})
    assert ids(response) == [wanted.pk]


@pytest.mark.parametrize(
    "params",
    [
        {"q": "PASTEIS"},
        {"q": "nata -pastéis"},
        {"q": '"de nata"'},
        {"q": "seats"},
        {"entity": " LISBON "},
        {"q": "nata", "entity": "lisbon"},
    ],
)
def test_it_filters_as_the_memories_page_does(alice_api, alice, client, params):
    make_memory(alice, "Loves pastéis de nata.", entities=["Lisbon"])
    make_memory(alice, "Buys natas in Lisbon.", entities=["Lisbon"])
    make_memory(alice, "Prefers aisle seat.", entities=["flights"])
    client.force_login(alice)
    page = client.get("/memories/", {**params, "status": "active"})
    on_page = [memory.pk for memory in page.context["memories"]]
    assert ids(alice_api.get("/v1/memories", params=params)) == on_page


def test_it_shows_each_stamp_read_with_the_page(alice_api, alice, django_assert_num_queries):
    now = timezone.now()
    stamped = make_memory(alice, "stamped", created_at=now - timedelta(days=1))
    stamp(stamped, now - timedelta(hours=5))
    make_memory(alice, "never", created_at=now)
    listed = alice_api.get("/v1/memories").json()["memories"]
    assert [(m["content"], m["last_retrieved_at"]) for m in listed] == [
        ("never", None),
        ("stamped", (now - timedelta(hours=5)).isoformat()),
    ]
    # The stamps come in the page's one query, not one query a memory.
    rows, _ = list_memories(alice, status="active", limit=10)
    with django_assert_num_queries(0):
        assert [row.last_retrieved_at for row in rows] == [None, now - timedelta(hours=5)]
