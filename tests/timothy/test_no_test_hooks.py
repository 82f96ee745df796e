"""The service's code does not know it is under test: what differs in the
suite is stated in tests/settings.py and tests/conftest.py, never switched on
inside memories/, retrieval/, timothy/ or the client."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["memories", "retrieval", "timothy", "client/timothy_client"]
# A branch on being under test, however it is spelt.
HOOK = re.compile(
    r"\bTESTING\b"
    r"|settings\.TEST\b"
    r"|_for_tests?\b"
    r"|patch point"
    r"|[\"']pytest[\"'] in sys\.modules"
    r"|^\s*(?:import|from) pytest\b"
    r"|PYTEST_CURRENT_TEST",
    re.MULTILINE,
)


def production_files() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "tests" not in path.relative_to(ROOT).parts
    )


@pytest.mark.parametrize(
    "line",
    [
        'TESTING = "pytest" in sys.modules',
        "if settings.TESTING:",
        "if settings.TEST:",
        "def reset_for_tests():",
        "# a patch point for the suite",
        "import pytest",
        'if os.environ.get("PYTEST_CURRENT_TEST"):',
    ],
)
def test_the_pattern_finds_a_hook(line):
    assert HOOK.search(line)


def test_no_production_module_branches_on_being_under_test():
    assert len(production_files()) > 50
    found = [
        f"{path.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}: {match.group()}"
        for path in production_files()
        for text in [path.read_text(encoding="utf-8")]
        for match in HOOK.finditer(text)
    ]
    assert found == []
