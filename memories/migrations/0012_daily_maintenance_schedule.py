"""The daily schedule is named for all it does: memories.tasks.daily_maintenance.

Consolidation, forgetting expired idempotency keys and folding the BM25 corpus
changes. Only the row migration 0002 created is renamed; a schedule an
operator made by hand is left as it is (the old function name still runs).
"""

from django.db import migrations

OLD = ("Daily consolidation", "memories.tasks.consolidate_daily")
NEW = ("Daily maintenance", "memories.tasks.daily_maintenance")


def rename(apps, schema_editor, old=OLD, new=NEW):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(name=old[0], func=old[1]).update(name=new[0], func=new[1])


def rename_back(apps, schema_editor):
    rename(apps, schema_editor, old=NEW, new=OLD)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0011_embedding_catch_up_schedule"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(rename, rename_back)]
