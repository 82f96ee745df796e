import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memories.models import Memory
from retrieval.render import BLOCK_CLOSE, BLOCK_OPEN
from tests.base import make_memory


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("recall", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_it_prints_the_block(alice):
    make_memory(alice, "Prefers an aisle seat.", Memory.Type.PREFERENCE)
    out, _ = run("--owner", "alice", "which", "seat?")
    assert out.startswith(BLOCK_OPEN)
    assert "- [preference] Prefers an aisle seat.\n" in out
    assert out.rstrip("\n").endswith(BLOCK_CLOSE)


@pytest.mark.django_db
def test_it_prints_the_json_and_stamps_unless_dry_run(alice):
    memory = make_memory(alice, "Prefers an aisle seat.")
    out, _ = run("--owner", "alice", "--json", "--dry-run", "--budget", "300", "seat")
    data = json.loads(out)
    assert data["token_budget"] == 300
    assert [item["id"] for item in data["memories"]] == [memory.pk]
    memory.refresh_from_db()
    assert memory.last_retrieved_at is None
    run("--owner", "alice", "seat")
    memory.refresh_from_db()
    assert memory.last_retrieved_at is not None


@pytest.mark.django_db
def test_it_takes_the_pipeline_and_as_of(alice):
    now = timezone.now()
    make_memory(alice, "Seat notes.", created_at=now - timedelta(days=2))
    out, _ = run(
        "--owner",
        "alice",
        "--json",
        "--pipeline",
        "freshness",
        "--as-of",
        (now - timedelta(days=3)).isoformat(),
        "seat",
    )
    data = json.loads(out)
    assert data["pipeline"] == "freshness"
    assert data["memories"] == []


@pytest.mark.django_db
def test_it_says_when_nothing_matched(alice):
    out, err = run("--owner", "alice", "seat")
    assert out == ""
    assert "No memories matched" in err


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--owner", "nobody", "seat"], "no owner named 'nobody'"),
        (["--owner", "alice", "--budget", "0", "seat"], "between 1 and"),
        (["--owner", "alice", "--as-of", "yesterday", "seat"], "not an ISO-8601"),
    ],
)
def test_it_reports_bad_input(alice, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)
