"""Bob's token must never reach anything of Alice's: her ids are 404s, the same as
ids that do not exist, and her content never appears in his answers."""

import pytest

from memories.models import Memory
from tests.base import make_memory

SECRET = "Alice's locker code is 4711."


@pytest.fixture
def alice_memory(alice):
    return make_memory(alice, SECRET, entities=["locker"], session_id="s-1")


def test_it_hides_alices_memories_from_bobs_list(bob_api, bob, alice_memory):
    make_memory(bob, "Bob likes chess.")
    for params in (
        {},
        {"status": "all"},
        {"entity": "locker"},
        {"q": "locker"},
        {"session_id": "s-1"},
    ):
        response = bob_api.get("/v1/memories", params=params)
        assert response.status_code == 200
        assert SECRET not in response.text
        assert all(m["id"] != alice_memory.pk for m in response.json()["memories"])


@pytest.mark.parametrize(
    "body",
    [
        {"action": "confirm"},
        {"action": "reject"},
        {"action": "reconfirm"},
        {"action": "archive"},
        {"action": "supersede", "content": "Bob was here."},
    ],
)
def test_it_answers_404_for_alices_ids_to_bob(bob_api, alice_memory, body):
    response = bob_api.post(f"/v1/memories/{alice_memory.pk}", body)
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_found",
        "message": f"No memory {alice_memory.pk}.",
    }
    alice_memory.refresh_from_db()
    assert alice_memory.status == Memory.Status.ACTIVE
    assert alice_memory.superseded_by_id is None


def test_it_answers_404_for_alices_chain_to_bob(bob_api, alice_memory):
    response = bob_api.get(f"/v1/memories/{alice_memory.pk}/chain")
    assert response.status_code == 404
    assert SECRET not in response.text


def test_it_answers_alices_ids_exactly_like_missing_ones(bob_api, alice_memory):
    missing = alice_memory.pk + 1000
    theirs = bob_api.post(f"/v1/memories/{alice_memory.pk}", {"action": "archive"})
    nothing = bob_api.post(f"/v1/memories/{missing}", {"action": "archive"})
    assert theirs.status_code == nothing.status_code == 404
    assert theirs.json()["error"]["code"] == nothing.json()["error"]["code"]
    assert set(theirs.headers) == set(nothing.headers)


def test_it_never_finds_alices_memories_in_bobs_search(bob_api, bob, alice_memory):
    make_memory(bob, "Bob's locker is in the basement.", entities=["locker"])
    for pipeline in ("fusion", "freshness"):
        response = bob_api.post(
            "/v1/memories/search", {"query": "What is the locker code?", "pipeline": pipeline}
        )
        assert response.status_code == 200
        assert SECRET not in response.text
        assert "4711" not in response.json()["block"]
        assert all(m["id"] != alice_memory.pk for m in response.json()["memories"])
