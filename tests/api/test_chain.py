from memories.models import Memory
from tests.base import make_memory


def test_it_returns_the_whole_chain_oldest_first_from_any_member(alice_api, alice):
    first = Memory.propose(alice, "Alice lives in Lyon.", Memory.Type.SEMANTIC)
    second = first.supersede("Alice lives in Paris.", actor=alice, reason="moved")
    third = second.supersede("Alice lives in Berlin.", actor=alice, via="page")
    for member in (first, second, third):
        response = alice_api.get(f"/v1/memories/{member.pk}/chain")
        assert response.status_code == 200
        body = response.json()
        assert body["head_id"] == third.pk
        assert [m["id"] for m in body["memories"]] == [first.pk, second.pk, third.pk]
        assert [m["status"] for m in body["memories"]] == ["superseded", "superseded", "active"]


def test_it_says_who_when_and_why_for_each_version(alice_api, alice):
    first = Memory.propose(alice, "Alice lives in Lyon.", Memory.Type.SEMANTIC)
    first.supersede("Alice lives in Paris.", actor=alice, reason="moved")
    body = alice_api.get(f"/v1/memories/{first.pk}/chain").json()
    old, new = body["memories"]
    assert [e["action"] for e in old["events"]] == ["proposed", "superseded"]
    superseded = old["events"][1]
    assert superseded["actor"] == "alice"
    assert superseded["reason"] == "moved"
    assert superseded["via"] == "api"
    assert superseded["data"]["successor"] == new["id"]
    assert superseded["at"]
    assert old["events"][0]["actor"] is None
    assert [e["action"] for e in new["events"]] == ["version"]


def test_it_returns_a_merged_chain(alice_api, alice):
    one = make_memory(alice, "Alice likes tea.")
    two = make_memory(alice, "Alice enjoys tea.")
    merged = Memory.merge([one, two], "Alice likes tea.")
    body = alice_api.get(f"/v1/memories/{one.pk}/chain").json()
    assert body["head_id"] == merged.pk
    assert {m["id"] for m in body["memories"]} == {one.pk, two.pk, merged.pk}
    assert body["memories"][-1]["id"] == merged.pk


def test_it_answers_a_lone_memory_as_a_chain_of_one(alice_api, alice):
    memory = make_memory(alice)
    body = alice_api.get(f"/v1/memories/{memory.pk}/chain").json()
    assert body["head_id"] == memory.pk
    assert [m["id"] for m in body["memories"]] == [memory.pk]


def test_it_answers_404_for_an_unknown_chain(alice_api):
    response = alice_api.get("/v1/memories/424242/chain")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
