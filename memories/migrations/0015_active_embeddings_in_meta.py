"""The vector leg's covering index joins the memory table's other indexes in
``Memory.Meta``, so that the model lists every index of its table. Retrieval
migration 0005 built it and still does on a new database: this one only tells
Django's migration state about it.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0014_drop_entity_refs_gin"),
        ("retrieval", "0005_active_embeddings"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(
                    model_name="memory",
                    index=models.Index(
                        condition=models.Q(("embedding__isnull", False), ("status", "active")),
                        fields=["owner", "created_at"],
                        include=("id", "type", "embedding"),
                        name="memory_active_embeddings",
                    ),
                ),
            ]
        )
    ]
