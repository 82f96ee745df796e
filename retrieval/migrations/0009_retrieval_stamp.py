"""Recall's stamps are the retrieval app's model (``retrieval.models.RetrievalStamp``),
in the table memories 0021 made: state only, no SQL (memories 0027 drops the
model from the memories app's state first)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0008_rebuild_one_owner"),
        ("memories", "0027_retrieval_stamp_moves_to_retrieval"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RetrievalStamp",
                    fields=[
                        (
                            "memory",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.PROTECT,
                                primary_key=True,
                                related_name="retrieval_stamp",
                                serialize=False,
                                to="memories.memory",
                            ),
                        ),
                        ("last_retrieved_at", models.DateTimeField()),
                        (
                            "owner",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "memories_retrievalstamp"},
                ),
            ],
            database_operations=[],
        ),
    ]
