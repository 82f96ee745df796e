import io
import json

from memories.models import Memory
from timothy.request_body import RequestBodyMiddleware


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


def chunks(data: bytes, size: int = 100):
    """A body requests sends with Transfer-Encoding: chunked and no Content-Length."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_it_answers_411_when_the_server_cannot_size_a_chunked_body(alice_api):
    # The test server, unlike gunicorn, does not decode chunked bodies.
    body = json.dumps({"content": "Likes aisle seats", "type": "semantic", "mode": "remember"})
    response = alice_api.post(
        "/v1/memories",
        data=chunks(body.encode()),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 411
    assert response.json()["error"]["code"] == "length_required"
    assert "Content-Length" in response.json()["error"]["message"]
    assert not Memory.objects.exists()


def wsgi_call(application, environ: dict) -> tuple[dict, bytes]:
    """What the application received, and the body it read."""
    seen = {}

    def app(environ, start_response):
        seen.update(environ)
        start_response("200 OK", [])
        return [environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))]

    body = b"".join(application(app)(environ, lambda status, headers: None))
    return seen, body


def chunked_environ(body: bytes, *, decoded: bool) -> dict:
    environ = {"REQUEST_METHOD": "POST", "HTTP_TRANSFER_ENCODING": "chunked"}
    environ["wsgi.input"] = io.BytesIO(body)
    if decoded:
        environ["wsgi.input_terminated"] = True
    return environ


def test_a_decoded_chunked_body_is_given_its_length(settings):
    settings.MAX_BODY_BYTES = 1000
    seen, body = wsgi_call(RequestBodyMiddleware, chunked_environ(b"x" * 700, decoded=True))
    assert seen["CONTENT_LENGTH"] == "700"
    assert body == b"x" * 700


def test_a_chunked_body_is_read_only_one_byte_past_the_limit(settings):
    settings.MAX_BODY_BYTES = 1000
    stream = chunked_environ(b"y" * 500_000, decoded=True)
    seen, body = wsgi_call(RequestBodyMiddleware, stream)
    assert seen["CONTENT_LENGTH"] == "1001"  # over the limit: the API answers 413
    assert len(body) == 1001


def test_an_undecoded_chunked_body_is_left_for_the_411(settings):
    seen, body = wsgi_call(
        RequestBodyMiddleware, chunked_environ(b"5\r\nhello\r\n0\r\n\r\n", decoded=False)
    )
    assert "CONTENT_LENGTH" not in seen
    assert body == b""
