from __future__ import annotations

import importlib
from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_q.models import Schedule

from memories import tasks
from memories.models import Memory, MemoryEvent
from memories.tasks import daily_maintenance
from retrieval.models import OwnerCorpusChange
from tests.base import make_memory
from tests.consolidation.helpers import axis

SCHEDULE_MIGRATION = "memories.migrations.0002_daily_consolidation_schedule"
RENAME_MIGRATION = "memories.migrations.0012_daily_maintenance_schedule"


def consolidate(*args: str) -> str:
    out = StringIO()
    call_command("consolidate", *args, stdout=out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def no_llm(settings):
    settings.LLM_BASE_URL = ""


def test_it_prints_the_plan_and_writes_nothing_on_a_dry_run(alice):
    tea = make_memory(alice, "Alice likes tea.", embedding=axis(0))
    make_memory(alice, "Alice likes tea!", embedding=axis(0))
    rome = make_memory(
        alice,
        "Alice went to Rome.",
        Memory.Type.EPISODIC,
        created_at=timezone.now() - timedelta(days=200),
    )
    output = consolidate("--dry-run")
    assert f"archive  #{rome.pk}" in output
    assert f"merge    group 1: #{tea.pk}" in output
    assert "Dry run: would merge 1 groups, archive 1, decay 0; nothing written." in output
    assert not MemoryEvent.objects.exists()
    assert Memory.objects.active().count() == 3


def test_it_consolidates_one_owner(alice, bob):
    for owner in (alice, bob):
        make_memory(owner, "Likes tea.", embedding=axis(0))
        make_memory(owner, "Likes tea!", embedding=axis(0))
    output = consolidate("--owner", "alice")
    assert "Consolidated: merged 1 groups (2 memories), archived 0, decayed 0." in output
    assert Memory.objects.for_owner(bob).active().count() == 2


def test_it_refuses_an_unknown_owner(db):
    with pytest.raises(CommandError, match="no owner named 'mallory'"):
        consolidate("--owner", "mallory")


def test_it_schedules_the_daily_maintenance_once(db):
    [schedule] = Schedule.objects.filter(func="memories.tasks.daily_maintenance")
    assert schedule.name == "Daily maintenance"
    assert schedule.schedule_type == Schedule.DAILY
    assert schedule.repeats == -1
    # At the quiet hour, the first one after the database was migrated (which
    # may lie behind a suite that runs past that hour).
    first_run = timezone.localtime(schedule.next_run)
    assert first_run.time() == importlib.import_module(SCHEDULE_MIGRATION).RUN_AT
    assert first_run > timezone.now() - timedelta(days=1)


def test_it_renames_the_schedule_an_older_version_created(db):
    create = importlib.import_module(SCHEDULE_MIGRATION)
    rename = importlib.import_module(RENAME_MIGRATION)
    Schedule.objects.all().delete()
    create.create_schedule(apps, None)
    create.create_schedule(apps, None)
    rename.rename(apps, None)
    [schedule] = Schedule.objects.all()
    assert (schedule.name, schedule.func) == (
        "Daily maintenance",
        "memories.tasks.daily_maintenance",
    )
    rename.rename_back(apps, None)
    [schedule] = Schedule.objects.all()
    assert schedule.func == "memories.tasks.consolidate_daily"


def test_it_still_runs_a_task_queued_under_the_old_name():
    assert tasks.consolidate_daily is daily_maintenance


def test_it_runs_the_scheduled_task(alice):
    make_memory(alice, "Likes tea.", embedding=axis(0))
    make_memory(alice, "Likes tea!", embedding=axis(0))
    assert daily_maintenance() == "merged 1 groups (2 memories), archived 0, decayed 0"
    # The BM25 corpus changes of those writes are folded into one row: the merged memory.
    assert list(OwnerCorpusChange.objects.values_list("owner_id", "documents")) == [(alice.pk, 1)]
