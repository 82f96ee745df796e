"""A frozen PostgreSQL (SIGSTOP on the postmaster and every process it started).

Requests that need the database answer 503 while it is still frozen (never
waiting for the freeze to end); requests that need nothing of it keep
answering; once it is thawed everything works again and nothing that was
acknowledged is lost. Real processes, real HTTP, the gunicorn of `make run`.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import psutil
import psycopg
import requests

from tests.faults.conftest import SERVICE_TOKEN, api, remember, signed_in
from timothy.drill import HTTP_TIMEOUT, ServeProcess, frozen, wait_for

# Generous: a shared 2-core machine can be slow, and none of this is timed.
DEADLINE = 120


def still_frozen(pids: list[int]) -> bool:
    return all(psutil.Process(pid).status() == psutil.STATUS_STOPPED for pid in pids)


def assert_database_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503, response.text[:300]
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "database_unavailable"


def calls(service: ServeProcess, memory_id: int, cookies: dict) -> dict:
    """One request of each kind; each builds its own session (threads share none)."""
    base = service.base
    token = {"Authorization": f"Bearer {service.owner_token}"}
    internal = {"Authorization": f"Bearer {SERVICE_TOKEN}"}

    def get(path: str, **kwargs):
        return lambda: requests.get(base + path, timeout=HTTP_TIMEOUT, **kwargs)

    def post(url: str, body: dict, headers: dict):
        return lambda: requests.post(url, json=body, headers=headers, timeout=HTTP_TIMEOUT)

    return {
        "list": get("/v1/memories", headers=token),
        "search": post(base + "/v1/memories/search", {"query": "garden"}, token),
        "create": post(
            base + "/v1/memories",
            {"content": "Written while frozen.", "type": "semantic", "mode": "remember"},
            token,
        ),
        "action": post(base + f"/v1/memories/{memory_id}", {"action": "reconfirm"}, token),
        "chain": get(f"/v1/memories/{memory_id}/chain", headers=token),
        "internal retrieve": post(
            service.internal + "/internal/v1/retrieve",
            {"owner": "owner", "query": "garden"},
            internal,
        ),
        "home page": get("/", cookies=cookies),
        "queue page": get("/queue/", cookies=cookies),
        "static file": get("/static/css/timothy.css"),
        "schema": get("/api/schema/"),
        "login page": get("/login/"),
    }


NEEDS_NO_DATABASE = {"static file", "schema", "login page"}
PAGES = {"home page", "queue page"}


def test_it_answers_while_frozen_and_serves_what_needs_no_database(start_service):
    service = start_service()
    kept = [remember(service, f"Fact {n} about the garden.") for n in range(3)]
    browser = signed_in(service)
    client = api(service)
    # Every request thread holds an open connection, as on a busy service:
    # those are what a frozen server leaves waiting forever.
    with ThreadPoolExecutor(8) as pool:
        warm = pool.map(
            lambda _: client.get(service.base + "/v1/memories", timeout=HTTP_TIMEOUT), range(16)
        )
        assert {response.status_code for response in warm} == {200}

    requests_by_name = calls(service, kept[0]["id"], browser.cookies.get_dict())
    with frozen(service.data_dir) as pids:
        # Twice: while the service finds out, and once it knows.
        for _ in range(2):
            with ThreadPoolExecutor(len(requests_by_name)) as pool:
                futures = {name: pool.submit(call) for name, call in requests_by_name.items()}
                answers = {name: future.result() for name, future in futures.items()}
            assert still_frozen(pids), "the answers must come during the freeze"
            for name, response in answers.items():
                if name in NEEDS_NO_DATABASE:
                    assert response.status_code == 200, (name, response.text[:300])
                elif name in PAGES:
                    assert response.status_code == 503, (name, response.text[:300])
                    assert response.headers["Content-Type"].startswith("text/html")
                    assert "out of reach for a moment" in response.text
                else:
                    assert_database_unavailable(response)

    # Thawed: the service answers again, and kept everything it acknowledged.
    search = requests_by_name["search"]
    wait_for(lambda: search().status_code == 200, DEADLINE, "a search to succeed after the thaw")
    listed = client.get(service.base + "/v1/memories", timeout=HTTP_TIMEOUT).json()["memories"]
    assert {memory["id"] for memory in kept} <= {memory["id"] for memory in listed}
    assert browser.get(service.base + "/", timeout=HTTP_TIMEOUT).status_code == 200


@dataclass
class Outcome:
    kind: str
    status: int | str
    during_freeze: bool
    content: str = ""


def test_it_never_hangs_requests_in_flight_when_the_database_freezes(start_service):
    service = start_service()
    frozen_now = threading.Event()
    stop = threading.Event()
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        session = api(service)
        count = 0
        while not stop.is_set():
            count += 1
            during = frozen_now.is_set()
            content = f"Client {number} wrote fact {count}."
            try:
                if count % 3:
                    response = session.post(
                        service.base + "/v1/memories/search",
                        json={"query": "fact"},
                        timeout=HTTP_TIMEOUT,
                    )
                    outcome = Outcome("search", response.status_code, during)
                else:
                    response = session.post(
                        service.base + "/v1/memories",
                        json={"content": content, "type": "episodic", "mode": "remember"},
                        timeout=HTTP_TIMEOUT,
                    )
                    outcome = Outcome("create", response.status_code, during, content)
            except requests.RequestException as error:
                outcome = Outcome("error", repr(error), during)
            with lock:
                outcomes.append(outcome)

    def answered_during_freeze() -> int:
        with lock:
            return sum(1 for outcome in outcomes if outcome.during_freeze)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(outcomes) >= 30, DEADLINE, "traffic before the freeze")
        with frozen(service.data_dir) as pids:
            frozen_now.set()
            # Requests sent during the freeze are answered during the freeze.
            wait_for(lambda: answered_during_freeze() >= 24, DEADLINE, "answers during the freeze")
            assert still_frozen(pids)
            frozen_now.clear()
        with lock:
            before_thaw = len(outcomes)
        wait_for(
            lambda: any(o.status in (200, 201) for o in outcomes[before_thaw:]),
            DEADLINE,
            "a success after the thaw",
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=HTTP_TIMEOUT + 10)

    errors = [outcome for outcome in outcomes if outcome.kind == "error"]
    assert not errors, errors[:3]
    assert {outcome.status for outcome in outcomes} <= {200, 201, 503}
    assert any(outcome.status == 503 for outcome in outcomes if outcome.during_freeze)
    # Every acknowledged write is in the database.
    acknowledged = {o.content for o in outcomes if o.kind == "create" and o.status == 201}
    with psycopg.connect(
        host=str(service.data_dir / "postgres"), dbname="timothy", user="postgres"
    ) as connection:
        stored = {
            row[0]
            for row in connection.execute(
                "SELECT content FROM memories_memory WHERE content LIKE 'Client %%'"
            )
        }
    assert acknowledged and acknowledged <= stored
