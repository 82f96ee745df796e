"""The OpenAPI schema documents exactly the public surface, and the service keeps
to it: schemathesis drives every public route over HTTP with generated requests,
valid and invalid, and checks each answer against the schema."""

from __future__ import annotations

import re

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memories.models import Memory
from tests.base import make_memory

OPERATIONS = {
    "GET /v1/memories",
    "POST /v1/memories",
    "POST /v1/memories/{memory_id}",
    "GET /v1/memories/{memory_id}/chain",
    "POST /v1/memories/search",
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    ignored_auth,
    allow_header_conformance,
]
# Enough to hit every field and error path; small enough to keep the suite quick.
MAX_EXAMPLES = 25


@pytest.fixture
def schema_json(anonymous_api) -> dict:
    response = anonymous_api.get("/api/schema/", params={"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_it_documents_exactly_the_five_routes(schema_json):
    operations = {
        f"{method.upper()} {path}"
        for path, methods in schema_json["paths"].items()
        for method in methods
    }
    assert operations == OPERATIONS


def test_it_documents_errors_auth_and_examples(schema_json):
    assert schema_json["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    create = schema_json["paths"]["/v1/memories"]["post"]
    assert {"201", "400", "401", "413", "429", "503"} <= set(create["responses"])
    error = create["responses"]["400"]["content"]["application/json"]
    assert error["schema"]["$ref"].endswith("/Error")
    assert error["examples"]
    assert create["requestBody"]["content"]["application/json"]["examples"]
    assert any(p["name"] == "Idempotency-Key" for p in create["parameters"])
    action = schema_json["paths"]["/v1/memories/{memory_id}"]["post"]
    assert {"200", "201", "404", "409"} <= set(action["responses"])


def test_it_serves_interactive_docs_without_a_cdn(anonymous_api):
    response = anonymous_api.get("/api/docs/")
    assert response.status_code == 200
    assert "text/html" in response.headers["Content-Type"]
    sources = re.findall(r'(?:src|href)="([^"]+)"', response.text)
    assert sources
    assert not [s for s in sources if s.startswith(("http:", "https:", "//"))]
    loaded = {}
    for source in sources:
        loaded[source] = anonymous_api.get(source)
        assert loaded[source].status_code == 200, source
    # The start-up script comes from the page's own address (no inline script,
    # for the Content-Security-Policy) and points Swagger UI at the schema.
    [script] = [source for source in sources if source.startswith("/api/docs/?")]
    assert "/api/schema/" in loaded[script].text


@pytest.fixture
def fuzzing(settings, live_server, alice, alice_token):
    """Everything a generated request may touch: no rate limit, a few memories."""
    settings.RATE_LIMIT_PER_MINUTE = 0
    make_memory(alice, "Alice prefers an aisle seat.", entities=["flights"])
    proposed = make_memory(alice, "Alice likes jazz.", status=Memory.Status.PROPOSED)
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json")
    return schema, proposed, {"Authorization": f"Bearer {alice_token}"}


# Routes with an id run twice: with generated ids (mostly 404s) and with the id
# of an existing memory, so that the actions themselves are exercised.
RUNS = [
    (label, existing_id)
    for label in sorted(OPERATIONS)
    for existing_id in ([False, True] if "{memory_id}" in label else [False])
]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize(("label", "existing_id"), RUNS)
def test_it_keeps_to_its_schema(fuzzing, live_server, label, existing_id, mode):
    schema, proposed, auth = fuzzing
    operation = schema.find_operation_by_label(label)
    path_parameters = {"memory_id": proposed.pk} if existing_id else None
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
    checks = CHECKS + ([negative_data_rejection] if mode == GenerationMode.NEGATIVE else [])

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def call(case):
        with requests.Session() as session:
            case.call_and_validate(
                base_url=live_server.url, session=session, headers=auth, checks=checks
            )

    call()
