"""The ``remember`` tool a model may call, in OpenAI and Anthropic formats.

The definitions are the JSON files in ``tool_definitions/`` (the repository's
``tools/`` folder holds copies, checked by a test). Their schema is a subset
of the ``POST /v1/memories`` body, so a call's arguments are posted as they
are, once validated here against that same schema.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from importlib import resources
from typing import Any

from timothy_client.errors import InvalidToolCall

REMEMBER = "remember"
TOOL_NAMES = frozenset({REMEMBER})


@cache
def _load(filename: str) -> dict[str, Any]:
    return json.loads(
        resources.files("timothy_client").joinpath("tool_definitions", filename).read_text()
    )


def openai_tools() -> list[dict[str, Any]]:
    """The ``tools`` list for an OpenAI-compatible Chat Completions request."""
    return [copy.deepcopy(_load("remember.openai.json"))]


def anthropic_tools() -> list[dict[str, Any]]:
    """The ``tools`` list for an Anthropic Messages request."""
    return [copy.deepcopy(_load("remember.anthropic.json"))]


def remember_schema() -> dict[str, Any]:
    """The JSON schema of the ``remember`` tool's arguments."""
    return copy.deepcopy(_load("remember.openai.json")["function"]["parameters"])


def parse_arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    """A tool call's arguments as a dict: OpenAI sends a JSON string, Anthropic an object."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as error:
            raise InvalidToolCall(f"The arguments are not JSON: {error}") from error
    if not isinstance(arguments, dict):
        raise InvalidToolCall("The arguments must be a JSON object.")
    return arguments


def validate(arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check ``arguments`` against ``schema``; raise ``InvalidToolCall`` naming the first problem.

    Covers the JSON-schema keywords our tool schemas use (type, enum, required,
    additionalProperties, min/maxLength, pattern, items, maxItems), so the
    client needs no schema library.
    """
    problem = _problem(arguments, schema, "arguments")
    if problem:
        raise InvalidToolCall(problem)


_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
}


def _problem(value: Any, schema: dict[str, Any], where: str) -> str | None:
    expected = schema.get("type")
    if expected:
        python_type = _TYPES[expected]
        is_bool = isinstance(value, bool)
        if not isinstance(value, python_type) or (is_bool and expected != "boolean"):
            return f"{where} must be of type {expected}."
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of: {', '.join(map(str, schema['enum']))}."
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} must not be empty."
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} must be at most {schema['maxLength']} characters."
        if "pattern" in schema and not re.search(schema["pattern"], value):
            if schema["pattern"] == r"\S":
                return f"{where} must not be blank."
            return f"{where} must match {schema['pattern']!r}."
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where} must have at most {schema['maxItems']} items."
        for index, item in enumerate(value):
            problem = _problem(item, schema.get("items", {}), f"{where}[{index}]")
            if problem:
                return problem
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                return f"{where}.{name} is required."
        if schema.get("additionalProperties") is False:
            unknown = sorted(set(value) - set(properties))
            if unknown:
                return f"{where} has unknown fields: {', '.join(unknown)}."
        for name, item in value.items():
            if name in properties:
                problem = _problem(item, properties[name], f"{where}.{name}")
                if problem:
                    return problem
    return None
