"""The HNSW graph holds the vectors at half precision (``halfvec``).

The graph only picks candidates: every distance a search reports is computed
again from the stored float32 vector (``memories.vectors.graph_distance``).
At half precision the graph takes half the memory and builds a little faster:
over the 900,000 active vectors of 1M memories, 1,004 MB built in 546–594 s
against 1,758 MB in 625 s (docs/benchmarks.md). The column keeps its float32 vectors.

The graph is rebuilt here the way a bulk load rebuilds it (dropped, then
built sized and parallel, for the dimension the column holds, as
``retrieval.index.resume_vector_index`` built it then: frozen in
``_frozen_vector_index``). Going back builds the float32 graph of 0004.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.comparison
import pgvector.django.halfvec
import pgvector.django.indexes
from django.conf import settings
from django.db import migrations, models

from memories.migrations import _frozen_vector_index as frozen

INDEX = "memory_embedding_hnsw"


def half_precision(apps, schema_editor) -> None:
    connection = schema_editor.connection
    frozen.pause_vector_index(connection)
    frozen.resume_vector_index(
        connection, ef_construction=128, default_dimensions=settings.EMBEDDING_DIMENSIONS
    )


def full_precision(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memories_memory WHERE status = 'active' AND embedding IS NOT NULL"
        )
        for name, value in frozen.build_settings(cursor.fetchone()[0]).items():
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
        cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
        cursor.execute(
            f"CREATE INDEX {INDEX} ON memories_memory USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 128) "
            "WHERE status = 'active'"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0017_rate_limit_unlogged"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(half_precision, full_precision)],
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name=INDEX),
                migrations.AddIndex(
                    model_name="memory",
                    index=pgvector.django.indexes.HnswIndex(
                        django.contrib.postgres.indexes.OpClass(
                            django.db.models.functions.comparison.Cast(
                                "embedding",
                                pgvector.django.halfvec.HalfVectorField(
                                    dimensions=settings.EMBEDDING_DIMENSIONS
                                ),
                            ),
                            name="halfvec_cosine_ops",
                        ),
                        condition=models.Q(("status", "active")),
                        ef_construction=128,
                        m=16,
                        name=INDEX,
                    ),
                ),
            ],
        ),
    ]
