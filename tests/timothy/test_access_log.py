"""The log formatting of timothy/access_log.py, through gunicorn's own access
logger and Django's configured runserver log: no value of a query string, in
any atom a format can name. (tests/faults/test_access_log.py checks the
console of a whole served instance.)"""

from __future__ import annotations

import logging
from datetime import timedelta
from io import StringIO
from types import SimpleNamespace

import pytest
from gunicorn.config import Config

from timothy.access_log import QueryMaskingLogger, mask_message, mask_query

SECRET = "zqxsecret"


def access_log_line(tmp_path, access_log_format: str | None = None) -> str:
    config = Config()
    config.set("accesslog", str(tmp_path / "access.log"))
    if access_log_format:
        config.set("access_log_format", access_log_format)
    logger = QueryMaskingLogger(config)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f"/v1/memories?q={SECRET}&entity={SECRET}%20two&limit=5",
        "PATH_INFO": "/v1/memories",
        "QUERY_STRING": f"q={SECRET}&entity={SECRET}%20two&limit=5",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": f"http://localhost/memories/?q={SECRET}",
        "HTTP_USER_AGENT": "tests",
    }
    request = SimpleNamespace(headers=[("REFERER", environ["HTTP_REFERER"])])
    response = SimpleNamespace(
        status="302 Found",
        sent=0,
        headers=[("Location", f"/login/?next=/memories/%3Fq%3D{SECRET}")],
    )
    logger.access(response, request, environ, timedelta(milliseconds=3))
    for handler in logger.access_log.handlers:
        handler.flush()
    return (tmp_path / "access.log").read_text()


def test_gunicorns_default_access_line_names_parameters_not_values(tmp_path):
    line = access_log_line(tmp_path)
    assert SECRET not in line
    assert '"GET /v1/memories?q=***&entity=***&limit=*** HTTP/1.1" 302 0 ' in line
    assert '"http://localhost/memories/?q=***" "tests"' in line


def test_every_atom_that_can_hold_a_query_is_masked(tmp_path):
    line = access_log_line(
        tmp_path,
        "%(U)s|%(q)s|%({raw_uri}e)s|%({query_string}e)s|%({http_referer}e)s"
        "|%({referer}i)s|%({location}o)s",
    )
    assert SECRET not in line
    assert line.strip() == (
        "/v1/memories|q=***&entity=***&limit=***|/v1/memories?q=***&entity=***&limit=***"
        "|q=***&entity=***&limit=***|http://localhost/memories/?q=***"
        "|http://localhost/memories/?q=***|/login/?next=***"
    )


@pytest.mark.parametrize(
    ("query", "masked"),
    [
        ("", ""),
        ("q=", "q="),
        ("q=a+b&type=", "q=***&type="),
        ("bare", "***"),
        ("%71=x&name with space=y&created_at__gte=2024", "***=***&***=***&created_at__gte=***"),
        ("a&&b=1", "***&&b=***"),
    ],
)
def test_it_keeps_parameter_names_and_masks_values(query, masked):
    assert mask_query(query) == masked


@pytest.mark.parametrize(
    ("message", "masked"),
    [
        (
            f"Invalid request from ip=1.2.3.4: Invalid HTTP request line: "
            f"'GET /v1/memories?q={SECRET} more words HTTP/1.1'",
            "Invalid request from ip=1.2.3.4: Invalid HTTP request line: "
            "'GET /v1/memories?q=*** HTTP/1.1'",
        ),
        (
            f"Invalid request from ip=1.2.3.4: Invalid HTTP Version: '{SECRET} HTTP/1.1'",
            "Invalid request from ip=1.2.3.4: Invalid HTTP Version: '***'",
        ),
        (
            "Invalid request from ip=1.2.3.4: Invalid HTTP Header: 'X-Thing'",
            "Invalid request from ip=1.2.3.4: Invalid HTTP Header: 'X-Thing'",
        ),
        (
            f"Error handling request GET /memories/?q={SECRET}",
            "Error handling request GET /memories/?q=***",
        ),
    ],
)
def test_it_masks_what_gunicorns_warnings_quote(message, masked):
    assert mask_message(message) == masked


def test_gunicorns_warnings_go_through_the_mask(tmp_path):
    config = Config()
    config.set("errorlog", str(tmp_path / "error.log"))
    logger = QueryMaskingLogger(config)
    logger.warning(
        "Invalid request from ip={ip}: {error}".format(
            ip="127.0.0.1", error=f"Invalid HTTP request line: 'GET /?q={SECRET} HTTP/1.1'"
        )
    )
    logger.exception("Error handling request %s %s", "GET", f"/v1/memories?entity={SECRET}")
    logger.warning("Worker %s timed out (%d%% busy)", "12", 100)
    for handler in logger.error_log.handlers:
        handler.flush()
    text = (tmp_path / "error.log").read_text()
    assert SECRET not in text
    assert "'GET /?q=*** HTTP/1.1'" in text
    assert "Error handling request GET /v1/memories?entity=***" in text
    assert "Worker 12 timed out (100% busy)" in text


def test_runservers_request_log_names_parameters_not_values():
    # (pytest adds handlers of its own to the logger.)
    [handler] = [
        handler
        for handler in logging.getLogger("django.server").handlers
        if type(handler) is logging.StreamHandler
    ]
    stream = StringIO()
    previous = handler.setStream(stream)
    try:
        logging.getLogger("django.server").info(
            '"%s" %s %s',
            f"GET /memories/?q={SECRET}&page=2 HTTP/1.1",
            "200",
            "1234",
            extra={"server_time": "now", "status_code": 200},
        )
    finally:
        handler.setStream(previous)
    assert stream.getvalue() == '[now] "GET /memories/?q=***&page=*** HTTP/1.1" 200 1234\n'
