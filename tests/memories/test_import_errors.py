"""What import_memories says about a line it cannot read: where the JSON
breaks, and which line a chain's failure comes from."""

from __future__ import annotations

import json

import pytest

from memories.models import Memory
from tests.memories.test_import_memories import GOOD, failing_import, write_lines

pytestmark = pytest.mark.django_db


def chained(key: int, successor: int, content: str) -> dict:
    return {
        **GOOD,
        "id": key,
        "status": "superseded",
        "superseded_by": successor,
        "content": content,
    }


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_it_names_the_column_where_a_cut_line_stops(alice, tmp_path, ending):
    cut = json.dumps({**GOOD, "id": 2})[:-1]  # the closing brace is missing
    path = tmp_path / "cut.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + ending + cut.encode() + ending)

    _, err = failing_import(path)

    assert err.splitlines() == [
        f"line 2: not JSON (Expecting ',' delimiter at column {len(cut) + 1})"
    ]


def test_it_names_the_column_of_an_error_inside_the_line(alice, tmp_path):
    text = '{"content": "Likes tea.", "type": "semantic" "status": "active"}'
    path = write_lines(tmp_path / "comma.jsonl", [text])

    _, err = failing_import(path)

    column = text.index('"status"') + 1  # where a comma was expected, counted from 1
    assert err.splitlines() == [f"line 1: not JSON (Expecting ',' delimiter at column {column})"]


def test_it_names_the_unreadable_line_that_holds_a_successor(alice, tmp_path):
    # An export writes each line's id first.
    broken = json.dumps({"id": 2, **GOOD, "content": "Alice likes green tea."})[:-1]
    path = write_lines(tmp_path / "chain.jsonl", [chained(1, 2, "Alice likes black tea."), broken])

    _, err = failing_import(path)

    assert err.splitlines() == [
        "line 1: its successor 2 (line 2, which could not be read) failed",
        f"line 2: not JSON (Expecting ',' delimiter at column {len(broken) + 1})",
    ]
    assert not Memory.objects.for_owner(alice).exists()


def test_it_says_an_unreadable_line_may_be_the_missing_successor(alice, tmp_path):
    path = write_lines(
        tmp_path / "chain.jsonl",
        [chained(1, 2, "Alice likes black tea."), "{{{ not json at all", GOOD],
    )

    _, err = failing_import(path)

    assert err.splitlines() == [
        "line 1: superseded_by 2 is not the id of any line that could be read; "
        "line 2 could not be read and may be it",
        "line 2: not JSON (Expecting property name enclosed in double quotes at column 2)",
    ]
    assert list(Memory.objects.for_owner(alice).values_list("content", flat=True)) == [
        GOOD["content"]
    ]


def test_it_still_says_when_no_line_has_the_id(alice, tmp_path):
    path = write_lines(tmp_path / "chain.jsonl", [chained(1, 999, "Alice likes black tea."), GOOD])

    _, err = failing_import(path)

    assert err.splitlines() == [
        "line 1: superseded_by 999 is not the id of a line in this file",
    ]
