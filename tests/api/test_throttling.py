import threading

from django.core.cache import caches
from django.db import connection

from memories.throttling import RATE_LIMIT_CACHE
from tests.api.conftest import issue_token


def test_it_answers_429_with_retry_after_over_the_limit(settings, make_api, alice):
    settings.RATE_LIMIT_PER_MINUTE = 3
    api = make_api(issue_token(alice))
    answers = [api.get("/v1/memories") for _ in range(8)]
    codes = [a.status_code for a in answers]
    # The window is the calendar minute and may turn once during the loop: the
    # first three always pass, no minute lets more than three through, and one
    # of the (at most two) minutes gets at least four requests.
    assert codes[:3] == [200, 200, 200]
    assert set(codes) == {200, 429}
    assert codes.count(200) <= 6
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["error"]["code"] == "rate_limited"
            assert 1 <= int(answer.headers["Retry-After"]) <= 60


def test_it_counts_each_token_on_its_own(settings, make_api, alice):
    settings.RATE_LIMIT_PER_MINUTE = 2
    first = make_api(issue_token(alice))
    second = make_api(issue_token(alice))
    for _ in range(3):
        first.get("/v1/memories")
    assert second.get("/v1/memories").status_code == 200


def test_it_counts_in_postgresql_where_every_worker_sees_it(settings, make_api, alice):
    settings.RATE_LIMIT_PER_MINUTE = 100
    api = make_api(issue_token(alice))
    for _ in range(3):
        assert api.get("/v1/memories").status_code == 200
    token = alice.api_tokens.get()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT sum(value::bigint) FROM {caches[RATE_LIMIT_CACHE]._table} "
            "WHERE cache_key LIKE %s",
            [f"token:{token.pk}:%"],
        )
        assert cursor.fetchone()[0] == 3


def test_it_counts_concurrent_requests_exactly(settings, make_api, alice):
    settings.RATE_LIMIT_PER_MINUTE = 100
    raw = issue_token(alice)
    clients = [make_api(raw) for _ in range(6)]
    barrier = threading.Barrier(len(clients))

    def hit(client):
        barrier.wait()
        for _ in range(5):
            client.get("/v1/memories")

    threads = [threading.Thread(target=hit, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    token = alice.api_tokens.get()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT sum(value::bigint) FROM {caches[RATE_LIMIT_CACHE]._table} "
            "WHERE cache_key LIKE %s",
            [f"token:{token.pk}:%"],
        )
        assert cursor.fetchone()[0] == 30


def test_it_turns_the_limit_off_at_zero(settings, make_api, alice):
    settings.RATE_LIMIT_PER_MINUTE = 0
    api = make_api(issue_token(alice))
    assert all(api.get("/v1/memories").status_code == 200 for _ in range(5))


def test_it_keeps_its_counters_out_of_the_write_ahead_log(db):
    # A logged counter made every request wait for the log to reach the disk.
    table = caches[RATE_LIMIT_CACHE]._table
    with connection.cursor() as cursor:
        cursor.execute("SELECT relpersistence FROM pg_class WHERE relname = %s", [table])
        assert cursor.fetchone() == ("u",)
