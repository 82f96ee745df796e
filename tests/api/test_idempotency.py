import threading
from datetime import timedelta

from django.utils import timezone

from memories.idempotency import key_digest
from memories.models import IdempotencyRecord, Memory
from memories.tasks import daily_maintenance
from tests.base import make_memory

BODY = {"content": "Alice likes figs.", "type": "preference", "mode": "remember"}


def test_it_replays_a_retried_create(alice_api):
    headers = {"Idempotency-Key": "create-1"}
    first = alice_api.post("/v1/memories", BODY, headers=headers)
    second = alice_api.post("/v1/memories", BODY, headers=headers)
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert Memory.objects.count() == 1


def test_it_writes_again_without_a_key(alice_api):
    alice_api.post("/v1/memories", BODY)
    alice_api.post("/v1/memories", BODY)
    assert Memory.objects.count() == 2


def test_it_writes_once_for_a_key_sent_concurrently(make_api, alice_token):
    clients = [make_api(alice_token) for _ in range(6)]
    barrier = threading.Barrier(len(clients))
    answers: list = []

    def post(client):
        barrier.wait()
        answers.append(client.post("/v1/memories", BODY, headers={"Idempotency-Key": "race"}))

    threads = [threading.Thread(target=post, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [201] * 6
    assert len({a.json()["id"] for a in answers}) == 1
    assert Memory.objects.count() == 1


def test_it_refuses_a_key_reused_for_another_body(alice_api):
    headers = {"Idempotency-Key": "create-2"}
    assert alice_api.post("/v1/memories", BODY, headers=headers).status_code == 201
    other = alice_api.post("/v1/memories", {**BODY, "content": "Figs, no."}, headers=headers)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert Memory.objects.count() == 1


def test_it_replays_a_retried_supersede(alice_api, alice):
    memory = make_memory(alice)
    headers = {"Idempotency-Key": "edit-1"}
    body = {"action": "supersede", "content": "Alice prefers window seats."}
    first = alice_api.post(f"/v1/memories/{memory.pk}", body, headers=headers)
    second = alice_api.post(f"/v1/memories/{memory.pk}", body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    # Without the key the retry is an illegal transition: the memory is superseded.
    third = alice_api.post(f"/v1/memories/{memory.pk}", body)
    assert third.status_code == 409
    assert third.json()["error"]["details"]["head_id"] == first.json()["id"]
    assert Memory.objects.filter(owner=alice).count() == 2


def test_it_keeps_keys_per_owner(alice_api, bob_api):
    headers = {"Idempotency-Key": "shared"}
    mine = alice_api.post("/v1/memories", BODY, headers=headers)
    theirs = bob_api.post("/v1/memories", BODY, headers=headers)
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]
    assert IdempotencyRecord.objects.count() == 2


def test_it_does_not_keep_a_failed_answer(alice_api):
    headers = {"Idempotency-Key": "fix-and-retry"}
    bad = alice_api.post("/v1/memories", {**BODY, "type": "gossip"}, headers=headers)
    assert bad.status_code == 400
    good = alice_api.post("/v1/memories", BODY, headers=headers)
    assert good.status_code == 201


def test_it_rejects_an_unusable_key(alice_api):
    response = alice_api.post("/v1/memories", BODY, headers={"Idempotency-Key": "x" * 201})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_idempotency_key"
    assert not Memory.objects.exists()


def age_records(hours: float) -> None:
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=hours))


def test_it_still_replays_a_key_just_inside_its_time(settings, alice_api):
    settings.IDEMPOTENCY_KEY_HOURS = 24
    headers = {"Idempotency-Key": "late-retry"}
    alice_api.post("/v1/memories", BODY, headers=headers)
    age_records(23.9)
    retried = alice_api.post("/v1/memories", BODY, headers=headers)
    assert retried.headers["Idempotent-Replayed"] == "true"
    assert Memory.objects.count() == 1


def test_an_expired_key_writes_again(settings, alice_api):
    settings.IDEMPOTENCY_KEY_HOURS = 24
    headers = {"Idempotency-Key": "reused-next-week"}
    first = alice_api.post("/v1/memories", BODY, headers=headers)
    age_records(24.1)
    again = alice_api.post("/v1/memories", BODY, headers=headers)
    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again.headers
    assert again.json()["id"] != first.json()["id"]
    assert Memory.objects.count() == 2
    record = IdempotencyRecord.objects.get()
    assert record.response_body["id"] == again.json()["id"]


def test_the_daily_job_forgets_only_expired_keys(settings, alice_api):
    settings.IDEMPOTENCY_KEY_HOURS = 24
    alice_api.post("/v1/memories", BODY, headers={"Idempotency-Key": "old"})
    age_records(30)
    alice_api.post(
        "/v1/memories",
        {**BODY, "content": "Alice likes plums."},
        headers={"Idempotency-Key": "fresh"},
    )
    daily_maintenance()
    assert list(IdempotencyRecord.objects.values_list("key_digest", flat=True)) == [
        key_digest("fresh")
    ]
    assert Memory.objects.count() == 2
