"""Rebuild the embedding index with ef_construction 128 (was pgvector's 64).

A graph built with the wider candidate list links near-duplicates reliably: at
64 the daily consolidation's probes got lost about 60 times as often and left a
planted near-duplicate pair unmerged in about half the 100,000-memory benchmark
runs (docs/consolidation.md). `make run` migrates before serving, so the
rebuild never holds up a user turn; the memory setting keeps a large graph in
memory while it is built.
"""

import pgvector.django.indexes
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0003_supersede_only"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL("SET LOCAL maintenance_work_mem = '512MB'", migrations.RunSQL.noop),
        migrations.RemoveIndex(
            model_name="memory",
            name="memory_embedding_hnsw",
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(("status", "active")),
                ef_construction=128,
                fields=["embedding"],
                m=16,
                name="memory_embedding_hnsw",
                opclasses=["vector_cosine_ops"],
            ),
        ),
    ]
