"""Recall's stamps move off the memory rows into their own narrow table.

``last_retrieved_at`` was a column of ``memories_memory``: every stamp rewrote
the memory's row, with a new entry in each of its indexes (the HNSW graph's
included), and cleared its page's all-visible bit, which the vector leg's
index-only scan needs. ``memories_retrievalstamp`` holds one row per memory
recall has packed (memories.models.RetrievalStamp). The stamps already written
are copied over; going back copies them onto the rows again.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

COPY_STAMPS_OVER = """
    INSERT INTO memories_retrievalstamp (memory_id, owner_id, last_retrieved_at)
    SELECT id, owner_id, last_retrieved_at FROM memories_memory
    WHERE last_retrieved_at IS NOT NULL
"""
# The rows' triggers compare a changed row's text and status only: a stamp
# copied back records nothing in the retrieval index.
COPY_STAMPS_BACK = """
    UPDATE memories_memory m SET last_retrieved_at = s.last_retrieved_at
    FROM memories_retrievalstamp s WHERE s.memory_id = m.id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0020_embedding_half"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
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
        ),
        migrations.RunSQL(COPY_STAMPS_OVER, COPY_STAMPS_BACK),
        migrations.RemoveField(model_name="memory", name="last_retrieved_at"),
    ]
