import threading

from memories.models import Memory
from tests.base import make_memory


def test_it_lets_one_of_many_concurrent_supersedes_win(make_api, alice, alice_token):
    memory = make_memory(alice, "Alice lives in Lyon.")
    clients = [make_api(alice_token) for _ in range(8)]
    barrier = threading.Barrier(len(clients))
    answers: list = []

    def supersede(client, n: int):
        barrier.wait()
        answers.append(
            client.post(
                f"/v1/memories/{memory.pk}",
                {"action": "supersede", "content": f"Alice lives in city {n}."},
            )
        )

    threads = [threading.Thread(target=supersede, args=(c, n)) for n, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] + [409] * 7
    winner = next(a.json() for a in answers if a.status_code == 201)
    for loser in (a for a in answers if a.status_code == 409):
        assert loser.json()["error"]["details"]["head_id"] == winner["id"]
    chain = Memory.objects.chain(memory)
    assert [m.pk for m in chain if m.superseded_by_id is None] == [winner["id"]]
    assert Memory.objects.filter(owner=alice).count() == 2
