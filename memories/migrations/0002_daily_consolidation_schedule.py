"""The daily consolidation job, as a django-q2 schedule (visible in the admin)."""

from datetime import datetime, time, timedelta

from django.db import migrations
from django.utils import timezone

SCHEDULE_NAME = "Daily consolidation"
FUNC = "memories.tasks.consolidate_daily"
# Local time of day the job runs: a quiet hour.
RUN_AT = time(3, 30)


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    now = timezone.localtime()
    first_run = timezone.make_aware(datetime.combine(now.date(), RUN_AT))
    if first_run <= now:
        first_run += timedelta(days=1)
    Schedule.objects.get_or_create(
        name=SCHEDULE_NAME,
        defaults={"func": FUNC, "schedule_type": "D", "repeats": -1, "next_run": first_run},
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE_NAME, func=FUNC).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
