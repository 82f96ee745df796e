from memories.models import Memory


def test_it_answers_413_for_a_body_over_the_limit(settings, alice_api):
    settings.MAX_BODY_BYTES = 2048
    body = {"content": "x" * 3000, "type": "semantic", "mode": "remember"}
    response = alice_api.post("/v1/memories", body)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "payload_too_large"
    assert error["details"] == {"limit_bytes": 2048}
    assert not Memory.objects.exists()


def test_it_answers_413_on_every_writing_route(settings, alice_api):
    settings.MAX_BODY_BYTES = 1024
    padding = "y" * 2000
    for path in ("/v1/memories/1", "/v1/memories/search"):
        response = alice_api.post(path, {"pad": padding})
        assert response.status_code == 413, path


def test_it_accepts_a_body_at_the_limit(settings, alice_api):
    settings.MAX_BODY_BYTES = 2048
    settings.MAX_CONTENT_CHARS = 4000
    prefix = '{"type": "semantic", "mode": "remember", "content": "'
    content = "z" * (2048 - len(prefix) - 2)
    data = (prefix + content + '"}').encode()
    assert len(data) == 2048
    response = alice_api.post(
        "/v1/memories", data=data, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201


def test_it_answers_413_for_a_body_far_over_the_limit(settings, alice_api):
    settings.MAX_BODY_BYTES = 1024
    data = b'{"content": "' + b"a" * 200_000 + b'"}'
    response = alice_api.post(
        "/v1/memories", data=data, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
