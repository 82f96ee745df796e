"""Settings from environment variables, parsed and checked as the settings load.

A bad value stops start-up with one sentence that names the variable, what it
holds and what it may hold: a typo in a deployment's environment must never
become a silent default (``DEBUG=ture`` read as false) or surface later as an
error blamed on a client. Pure functions of ``os.environ``: no file, socket or
database is touched here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ImproperlyConfigured

# The spellings a boolean variable accepts, in any case; anything else is an error.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class InvalidSetting(ImproperlyConfigured):
    """An environment variable holds a value the service cannot run with."""


def _raw(name: str) -> str | None:
    """The variable's value, stripped; None when it is unset or blank."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _shown(value: str) -> str:
    # Quoted and cut short: the sentence must stay one readable line.
    return repr(value if len(value) <= 60 else value[:57] + "...")


def envbool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise InvalidSetting(
        f"{name} is {_shown(value)}; use one of {', '.join(TRUE_WORDS + FALSE_WORDS)} "
        "(in any case)."
    )


def _check_range(name: str, number, minimum, maximum):
    if minimum is not None and number < minimum:
        raise InvalidSetting(f"{name} is {number}; it must be at least {minimum}.")
    if maximum is not None and number > maximum:
        raise InvalidSetting(f"{name} is {number}; it must be at most {maximum}.")
    return number


def envint(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise InvalidSetting(f"{name} is {_shown(value)}; it must be a whole number.") from None
    return _check_range(name, number, minimum, maximum)


def envfloat(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> float:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidSetting(f"{name} is {_shown(value)}; it must be a number.")
    if above is not None and number <= above:
        raise InvalidSetting(f"{name} is {value}; it must be more than {above:g}.")
    return _check_range(name, number, minimum, maximum)


def envstr(name: str, default: str = "") -> str:
    value = os.environ.get(name)
    return default if value is None else value.strip()


def envchoice(name: str, default: str, choices: Iterable[str]) -> str:
    """One of ``choices`` (matched in any case, returned as spelled there)."""
    choices = tuple(choices)
    value = _raw(name)
    if value is None:
        return default
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise InvalidSetting(f"{name} is {_shown(value)}; use one of: {', '.join(choices)}.")


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in envstr(name, default).split(",") if item.strip()]


def envaddress(name: str, default: str) -> str:
    """A ``host:port`` to listen on."""
    value = _raw(name) or default
    host, colon, port = value.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidSetting(f"{name} is {_shown(value)}; it must be host:port, e.g. {default}.")
    return value


def envurl(name: str, default: str = "") -> str:
    """An http(s) URL, or empty when the default is empty and nothing is set."""
    value = _raw(name)
    if value is None:
        return default
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidSetting(f"{name} is {_shown(value)}; it must be an http:// or https:// URL.")
    return value


def envtimezone(name: str, default: str) -> str:
    value = _raw(name) or default
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSetting(
            f"{name} is {_shown(value)}; use a time zone name such as UTC or Europe/Paris."
        ) from None
    return value


def require(condition: bool, sentence: str) -> None:
    """A rule between settings (e.g. a default within its maximum)."""
    if not condition:
        raise InvalidSetting(sentence)


def read_secret_key(path: Path) -> str:
    """The secret key kept in ``path``; empty if none was generated yet."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""
