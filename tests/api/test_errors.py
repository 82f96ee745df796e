"""The Django-level handlers behind the URLconfs: JSON on API paths, pages elsewhere."""

import json

import pytest
from django.db import OperationalError
from rest_framework.exceptions import ValidationError

from memories import errors
from memories.renderers import JSONRenderer


def raised(exc: Exception, handler, request):
    # Django calls handler500 while the exception is being handled.
    try:
        raise exc
    except Exception:
        return handler(request)


@pytest.mark.parametrize("path", ["/v1/memories", "/v2/x", "/internal/v1/retrieve", "/api/x"])
def test_it_answers_json_500_on_api_paths(rf, path):
    response = raised(RuntimeError("bug"), errors.server_error, rf.get(path))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert body["error"]["code"] == "internal_error"
    assert "bug" not in body["error"]["message"]


def test_it_answers_503_when_the_escaped_error_is_a_dead_database(rf):
    response = raised(OperationalError("connection refused"), errors.server_error, rf.get("/v1/x"))
    assert response.status_code == 503
    assert json.loads(response.content)["error"]["code"] == "database_unavailable"


def test_it_leaves_pages_to_django(rf, db):
    response = raised(RuntimeError("bug"), errors.server_error, rf.get("/queue/"))
    assert response.status_code == 500
    assert "application/json" not in response["Content-Type"]
    assert errors.not_found(rf.get("/queue/nothing"), None).status_code == 404
    assert "application/json" not in errors.not_found(rf.get("/x"), None)["Content-Type"]


def test_it_answers_json_400_on_api_paths(rf):
    response = errors.bad_request(rf.get("/v1/memories"), None)
    assert response.status_code == 400
    assert json.loads(response.content)["error"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("detail", "message"),
    [
        ({"content": ["This field is required."]}, "content: This field is required."),
        ({"entities": {1: ["Not a valid string."]}}, "entities[1]: Not a valid string."),
        ({"non_field_errors": ["Invalid data."]}, "Invalid data."),
        (["Plain."], "Plain."),
    ],
)
def test_it_sums_up_a_validation_error_in_one_sentence(detail, message):
    response = errors.api_exception_handler(ValidationError(detail), {})
    assert response.status_code == 400
    assert response.data["error"]["message"] == message
    assert response.data["error"]["details"] == json.loads(json.dumps(detail))


def test_it_builds_an_error_that_quotes_a_lone_surrogate_without_failing():
    # What DRF says of a bad choice: the client's text, quoted back.
    detail = {"type": ['"\ud800" is not a valid choice.'], "\udfff": ["Unknown field."]}
    response = errors.api_exception_handler(ValidationError(detail), {})
    body = JSONRenderer().render(response.data)
    error = json.loads(body)["error"]
    assert error["message"] == 'type: "\\ud800" is not a valid choice.'
    assert error["details"]["\\udfff"] == ["Unknown field."]


def test_it_renders_any_body_with_a_lone_surrogate_escaped():
    assert json.loads(JSONRenderer().render({"a\ud800": ["b\udc00"]})) == {"a\\ud800": ["b\\udc00"]}
    assert JSONRenderer().render({"plain": "é"}) == '{"plain":"é"}'.encode()
