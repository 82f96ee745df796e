"""What `make run` logs about a request keeps no value of its query string.

Searches carry the owner's words (`?q=`, `?entity=`) and a redacted text must
not live on in a log: gunicorn's access log, its warnings about requests it
refuses and Django's request warnings write the path and the parameter names,
never their values (nor those of a Referer). Checked on the whole service's
console output, as `make run` prints it."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

from tests.faults.conftest import api, signed_in
from timothy.drill import HTTP_TIMEOUT, wait_for

# Each request quotes its own marker, so a leak names its request.
MARKERS = {
    "api_q": "zqxapiquery",
    "api_entity": "zqxapientity",
    "api_400": "zqxbadstatus",
    "api_404": "zqxnotfound",
    "page_q": "zqxpagequery",
    "referer": "zqxreferer",
    "admin_q": "zqxadminquery",
    "raw": "zqxrawline",
}
LOG_WAIT_SECONDS = 60


def access_line(method: str, target: str, status: int) -> str:
    """The start of gunicorn's access-log line for a request, as a pattern."""
    return re.escape(f'"{method} {target} HTTP/1.1" {status} ')


def test_the_logs_keep_no_query_value(start_service):
    service = start_service()
    owner = api(service)
    answers = {
        "api": owner.get(
            service.base + f"/v1/memories?q={MARKERS['api_q']}&entity={MARKERS['api_entity']}",
            timeout=HTTP_TIMEOUT,
        ),
        "api_400": owner.get(
            service.base + f"/v1/memories?status={MARKERS['api_400']}", timeout=HTTP_TIMEOUT
        ),
        "api_404": owner.get(
            service.base + f"/v1/nowhere?q={MARKERS['api_404']}", timeout=HTTP_TIMEOUT
        ),
    }
    browser = signed_in(service)
    answers["page"] = browser.get(
        service.base + f"/memories/?q={MARKERS['page_q']}+and+more&type=",
        headers={"Referer": service.base + f"/memories/?q={MARKERS['referer']}"},
        timeout=HTTP_TIMEOUT,
    )
    answers["admin"] = browser.get(
        service.base + f"/admin/memories/memory/?q={MARKERS['admin_q']}", timeout=HTTP_TIMEOUT
    )
    assert {name: answer.status_code for name, answer in answers.items()} == {
        "api": 200,
        "api_400": 400,
        "api_404": 404,
        "page": 200,
        "admin": 200,
    }
    # A request line gunicorn refuses (a query not percent-encoded) is logged as
    # a warning quoting it.
    address = urlsplit(service.base)
    with socket.create_connection((address.hostname, address.port), timeout=HTTP_TIMEOUT) as raw:
        raw.sendall(f"GET /v1/memories?q={MARKERS['raw']}-café HTTP/1.1\r\n\r\n".encode())
        assert raw.recv(4096).startswith(b"HTTP/1.1 400 ")

    expected = [
        access_line("GET", "/v1/memories?q=***&entity=***", 200),
        access_line("GET", "/v1/memories?status=***", 400),
        access_line("GET", "/v1/nowhere?q=***", 404),
        access_line("GET", "/memories/?q=***&type=", 200)
        + r"\d+ "
        + re.escape('"' + service.base + '/memories/?q=***"'),
        access_line("GET", "/admin/memories/memory/?q=***", 200),
        r"Invalid request from ip=127\.0\.0\.1: .*/v1/memories\?q=\*\*\*",
        r"Bad Request: /v1/memories\n",
        r"Not Found: /v1/nowhere\n",
    ]
    for pattern in expected:
        wait_for(
            lambda pattern=pattern: re.search(pattern, service.output),
            LOG_WAIT_SECONDS,
            f"{pattern!r} in the output of serve:\n{service.output[-3000:]}",
        )
    leaked = {name: marker for name, marker in MARKERS.items() if marker in service.output}
    assert not leaked, service.output[-3000:]
