import pytest

from memories.models import Memory, MemoryEvent
from tests.base import make_memory


def act(api, memory_id: int, action: str, **fields):
    return api.post(f"/v1/memories/{memory_id}", {"action": action, **fields})


def test_it_confirms_a_proposal(alice_api, alice):
    memory = Memory.propose(alice, "Alice likes jazz.", Memory.Type.PREFERENCE)
    response = act(alice_api, memory.pk, "confirm", reason="yes, true")
    assert response.status_code == 200
    assert response.json()["status"] == "active"
    assert response.json()["last_confirmed_at"] is not None
    event = MemoryEvent.objects.filter(memory=memory).last()
    assert (event.action, event.actor, event.via, event.reason) == (
        "confirmed",
        alice,
        "api",
        "yes, true",
    )


def test_it_rejects_a_proposal(alice_api, alice):
    memory = Memory.propose(alice, "Alice hates jazz.", Memory.Type.PREFERENCE)
    response = act(alice_api, memory.pk, "reject")
    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    memory.refresh_from_db()
    assert memory.status == Memory.Status.REJECTED


def test_it_reconfirms_an_active_memory(alice_api, alice):
    memory = Memory.remember(alice, "Alice lives in Lyon.", Memory.Type.SEMANTIC)
    before = memory.last_confirmed_at
    response = act(alice_api, memory.pk, "reconfirm")
    assert response.status_code == 200
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert memory.last_confirmed_at > before


def test_it_archives_an_active_memory(alice_api, alice):
    memory = make_memory(alice)
    response = act(alice_api, memory.pk, "archive")
    assert response.status_code == 200
    assert response.json()["status"] == "archived"


def test_it_supersedes_with_a_new_head(alice_api, alice):
    memory = Memory.remember(alice, "Alice lives in Lyon.", Memory.Type.SEMANTIC, entities=["Lyon"])
    response = act(
        alice_api,
        memory.pk,
        "supersede",
        content="Alice lives in Paris.",
        entities=["Paris"],
        reason="moved",
    )
    assert response.status_code == 201
    head = response.json()
    assert head["id"] != memory.pk
    assert head["status"] == "active"
    assert head["content"] == "Alice lives in Paris."
    assert head["entities"] == ["Paris"]
    assert head["type"] == "semantic"
    memory.refresh_from_db()
    assert memory.status == Memory.Status.SUPERSEDED
    assert memory.superseded_by_id == head["id"]


def test_it_supersedes_a_proposal_with_another_type(alice_api, alice):
    memory = Memory.propose(alice, "Alice went to Rome.", Memory.Type.SEMANTIC)
    response = act(
        alice_api, memory.pk, "supersede", content="Alice went to Rome in May.", type="episodic"
    )
    assert response.status_code == 201
    assert response.json()["type"] == "episodic"


@pytest.mark.parametrize(
    ("status", "action"),
    [
        ("active", "confirm"),
        ("active", "reject"),
        ("proposed", "archive"),
        ("proposed", "reconfirm"),
        ("rejected", "supersede"),
        ("archived", "reconfirm"),
    ],
)
def test_it_answers_409_with_the_current_status(alice_api, alice, status, action):
    memory = make_memory(alice, status=status)
    fields = {"content": "new text"} if action == "supersede" else {}
    response = act(alice_api, memory.pk, action, **fields)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "illegal_transition"
    assert error["details"]["status"] == status
    assert status in error["message"]
    memory.refresh_from_db()
    assert memory.status == status


def test_it_names_the_head_when_the_memory_is_superseded(alice_api, alice):
    memory = make_memory(alice)
    middle = memory.supersede("second")
    head = middle.supersede("third")
    response = act(alice_api, memory.pk, "archive")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["details"]["status"] == "superseded"
    assert error["details"]["head_id"] == head.pk
    assert str(head.pk) in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"action": "delete"},
        {"action": "supersede"},
        {"action": "supersede", "content": ""},
        {"action": "supersede", "content": "x", "type": "gossip"},
        {"action": "confirm", "content": "sneaky"},
        {"action": "archive", "entities": ["x"]},
        {"action": "confirm", "because": "x"},
        {"action": ["confirm"]},
    ],
)
def test_it_rejects_a_bad_action_body(alice_api, alice, body):
    memory = make_memory(alice, status=Memory.Status.PROPOSED)
    response = alice_api.post(f"/v1/memories/{memory.pk}", body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    memory.refresh_from_db()
    assert memory.status == Memory.Status.PROPOSED


@pytest.mark.parametrize("memory_id", ["0", "999999", "99999999999999999999999"])
def test_it_answers_404_for_an_unknown_id(alice_api, memory_id):
    response = alice_api.post(f"/v1/memories/{memory_id}", {"action": "confirm"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_it_writes_nothing_for_an_unchanged_supersede(alice_api, alice):
    memory = Memory.remember(alice, "Alice lives in Lyon.", Memory.Type.SEMANTIC, entities=["Lyon"])
    events = memory.events.count()
    response = act(
        alice_api, memory.pk, "supersede", content="Alice lives in Lyon.", entities=[" Lyon "]
    )
    assert response.status_code == 200
    assert response.json()["id"] == memory.pk
    assert response.json()["status"] == "active"
    assert Memory.objects.count() == 1
    assert memory.events.count() == events


def test_it_confirms_a_proposal_superseded_unchanged(alice_api, alice):
    memory = Memory.propose(alice, "Alice went to Rome.", Memory.Type.EPISODIC)
    response = act(alice_api, memory.pk, "supersede", content="Alice went to Rome.")
    assert response.status_code == 200
    assert (response.json()["id"], response.json()["status"]) == (memory.pk, "active")
    assert Memory.objects.count() == 1
