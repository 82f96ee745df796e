"""Fault tests run the whole service (`manage.py serve`) in processes of its own,
on a temporary data folder with its own embedded PostgreSQL: freezing or
killing anything there touches neither the test database nor anyone else's."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.fakes.fixtures import fake_openai, openai_embeddings  # noqa: F401
from timothy.drill import HTTP_TIMEOUT, ServeProcess, service_env

SERVICE_TOKEN = "service-token-for-the-fault-tests"


@pytest.fixture
def start_service(tmp_path) -> Iterator[Callable[..., ServeProcess]]:
    """Start serve (waiting until it answers); everything it started is gone after the test."""
    started: list[ServeProcess] = []

    def start(**env: str) -> ServeProcess:
        data_dir = tmp_path / f"data{len(started)}"
        service = ServeProcess(service_env(data_dir, TIMOTHY_SERVICE_TOKEN=SERVICE_TOKEN, **env))
        started.append(service)
        service.wait_until_serving()
        return service

    yield start
    for service in started:
        try:
            service.stop()
        finally:
            service.kill()


def api(service: ServeProcess) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {service.owner_token}"
    return session


def remember(service: ServeProcess, content: str) -> dict:
    response = api(service).post(
        service.base + "/v1/memories",
        json={"content": content, "type": "semantic", "mode": "remember"},
        timeout=HTTP_TIMEOUT,
    )
    assert response.status_code == 201, response.text
    return response.json()


def signed_in(service: ServeProcess) -> requests.Session:
    """A browser-like session signed in as the owner."""
    session = requests.Session()
    page = session.get(service.base + "/login/", timeout=HTTP_TIMEOUT)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = session.post(
        service.base + "/login/",
        data={
            "csrfmiddlewaretoken": token,
            "username": "owner",
            "password": service.owner_password,
        },
        headers={"Referer": service.base + "/login/"},
        timeout=HTTP_TIMEOUT,
    )
    assert answer.status_code == 200 and "sessionid" in session.cookies, answer.text[:500]
    return session
