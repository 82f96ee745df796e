"""The embedding catch-up, as a django-q2 schedule (visible in the admin).

Every minute the worker gives a vector to memories that have waited more than
a minute without one: their embedding task was lost (a worker killed while it
held the task, a database stop while it stored the vector) or never queued.
"""

from django.db import migrations
from django.utils import timezone

SCHEDULE_NAME = "Embedding catch-up"
FUNC = "memories.tasks.catch_up_embeddings"
EVERY_MINUTES = 1


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.get_or_create(
        name=SCHEDULE_NAME,
        defaults={
            "func": FUNC,
            "schedule_type": "I",
            "minutes": EVERY_MINUTES,
            "repeats": -1,
            "next_run": timezone.now(),
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE_NAME, func=FUNC).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0010_memory_awaiting_embedding_index"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
