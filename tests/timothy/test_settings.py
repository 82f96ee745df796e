"""Settings are parsed and checked at start-up: a bad value stops the service
with one sentence naming the variable, never a default in disguise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from timothy import env

ROOT = Path(__file__).resolve().parents[2]


def manage_check(*options: str, **variables: str) -> subprocess.CompletedProcess:
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST", "TIMOTHY_"))
    }
    # `check` never connects; a URL nobody serves keeps the embedded server out of it.
    environment["DATABASE_URL"] = "postgres://nobody@127.0.0.1:9/nothing"
    environment.pop("DEBUG", None)
    environment.update(variables)
    return subprocess.run(
        [sys.executable, "manage.py", "check", *options],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("variables", "sentence"),
    [
        (
            {"TIMOTHY_DEFAULT_PIPELINE": "fusoin"},
            "TIMOTHY_DEFAULT_PIPELINE is 'fusoin'; use one of: fusion, freshness.",
        ),
        (
            {"TIMOTHY_DEFAULT_TOKEN_BUDGET": "40000"},
            "TIMOTHY_DEFAULT_TOKEN_BUDGET is 40000, above TIMOTHY_MAX_TOKEN_BUDGET (32000)",
        ),
        (
            {"TIMOTHY_MAX_TOKEN_BUDGET": "500", "TIMOTHY_DEFAULT_TOKEN_BUDGET": "501"},
            "TIMOTHY_DEFAULT_TOKEN_BUDGET is 501, above TIMOTHY_MAX_TOKEN_BUDGET (500)",
        ),
        (
            {"TIMOTHY_MAX_BODY_BYTES": "256k"},
            "TIMOTHY_MAX_BODY_BYTES is '256k'; it must be a whole",
        ),
        (
            {"TIMOTHY_RECALL_TIMEOUT": "ten"},
            "TIMOTHY_RECALL_TIMEOUT is 'ten'; it must be a number.",
        ),
        ({"TIMOTHY_LEG_TIMEOUT": "0"}, "TIMOTHY_LEG_TIMEOUT is 0; it must be more than 0."),
        ({"TIMOTHY_WEB_THREADS": "0"}, "TIMOTHY_WEB_THREADS is 0; it must be at least 1."),
        ({"DEBUG": "ture"}, "DEBUG is 'ture'; use one of 1, true, yes, on, 0, false, no, off"),
        ({"TIMOTHY_EMBEDDING_PROVIDER": "opneai"}, "TIMOTHY_EMBEDDING_PROVIDER is 'opneai'"),
        (
            {"TIMOTHY_EMBEDDING_PRECISION": "fp16"},
            "TIMOTHY_EMBEDDING_PRECISION is 'fp16'; use one of: int8, float32.",
        ),
        ({"TIMOTHY_PUBLIC_ADDR": "8000"}, "TIMOTHY_PUBLIC_ADDR is '8000'; it must be host:port"),
        (
            {"TIMOTHY_AUTO_PROMOTE_MIN_CONFIDENCE": "1.5"},
            "TIMOTHY_AUTO_PROMOTE_MIN_CONFIDENCE is 1.5; it must be at most 1.0.",
        ),
    ],
)
def test_it_stops_start_up_with_one_sentence_naming_the_variable(variables, sentence):
    result = manage_check(**variables)
    assert result.returncode != 0
    assert result.stderr.strip().startswith(f"Configuration error: {sentence}")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_it_starts_with_every_default():
    result = manage_check()
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("TRUE", True),
        ("yes", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("NO", False),
        ("off", False),
        ("", True),
        ("  ", True),
    ],
)
def test_it_reads_the_documented_boolean_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("SOME_FLAG", raw)
    assert env.envbool("SOME_FLAG", True) is expected


@pytest.mark.parametrize("raw", ["ture", "y", "2", "enabled", "none"])
def test_it_refuses_any_other_boolean_spelling(monkeypatch, raw):
    monkeypatch.setenv("SOME_FLAG", raw)
    with pytest.raises(env.InvalidSetting, match=f"SOME_FLAG is '{raw}'"):
        env.envbool("SOME_FLAG", False)


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e999", "3 s"])
def test_it_refuses_numbers_that_are_not_finite(monkeypatch, raw):
    monkeypatch.setenv("SOME_SECONDS", raw)
    with pytest.raises(env.InvalidSetting, match="SOME_SECONDS"):
        env.envfloat("SOME_SECONDS", 1.0, above=0)


def test_it_matches_a_choice_in_any_case(monkeypatch):
    monkeypatch.setenv("SOME_PIPELINE", " Freshness ")
    assert env.envchoice("SOME_PIPELINE", "fusion", ("fusion", "freshness")) == "freshness"


@pytest.mark.parametrize("raw", ["localhost", ":8000", "host:0", "host:70000", "host:http"])
def test_it_refuses_an_address_without_a_usable_port(monkeypatch, raw):
    monkeypatch.setenv("SOME_ADDR", raw)
    with pytest.raises(env.InvalidSetting, match="SOME_ADDR"):
        env.envaddress("SOME_ADDR", "127.0.0.1:8000")


@pytest.mark.parametrize("raw", ["api.openai.com/v1", "ftp://host", "http://"])
def test_it_refuses_a_base_url_that_is_not_http(monkeypatch, raw):
    monkeypatch.setenv("SOME_URL", raw)
    with pytest.raises(env.InvalidSetting, match="SOME_URL"):
        env.envurl("SOME_URL")


def test_it_refuses_an_unknown_time_zone(monkeypatch):
    monkeypatch.setenv("SOME_ZONE", "Mars/Olympus")
    with pytest.raises(env.InvalidSetting, match="SOME_ZONE is 'Mars/Olympus'"):
        env.envtimezone("SOME_ZONE", "UTC")


@pytest.mark.parametrize("settings_module", ["timothy.settings", "timothy.internal_settings"])
def test_it_passes_the_deployment_check_when_served_over_https(settings_module):
    result = manage_check(
        "--deploy",
        "--fail-level",
        "WARNING",
        TIMOTHY_HTTPS="true",
        DJANGO_SETTINGS_MODULE=settings_module,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_it_warns_only_of_what_the_readme_explains_over_plain_http():
    # `make run` serves http://127.0.0.1: these four are expected, and the README's
    # "Deploying" section says why each is and how TIMOTHY_HTTPS clears it.
    result = manage_check("--deploy")
    found = sorted(set(re.findall(r"\(security\.W\d+\)", result.stdout + result.stderr)))
    assert found == ["(security.W004)", "(security.W008)", "(security.W012)", "(security.W016)"]
    readme = (ROOT / "README.md").read_text()
    for warning in found:
        assert warning.strip("()") in readme
