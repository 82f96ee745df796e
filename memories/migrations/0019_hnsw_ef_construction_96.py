"""Build the HNSW graph with ef_construction 96 (was 128).

Since the graph holds half-precision vectors and consolidation re-probes a
lost probe wider and then exactly, 96 keeps what 128 was chosen for: every
planted near-duplicate group merged exactly in six of six 100,000-memory
runs, and the vector leg's walk finds the same share of the exact nearest
(docs/consolidation.md). It builds a quarter faster: 90,000 vectors in
38.6-41.4 s against 47.7-57.2 s, alternating (docs/benchmarks.md).

The graph is rebuilt the way a bulk load rebuilds it (dropped, then built
sized and parallel, for the dimension the column holds, as
``retrieval.index.resume_vector_index`` built it then: frozen in
``_frozen_vector_index``). Going back rebuilds it with 128.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.comparison
import pgvector.django.halfvec
import pgvector.django.indexes
from django.conf import settings
from django.db import migrations, models

from memories.migrations import _frozen_vector_index as frozen

INDEX = "memory_embedding_hnsw"


def rebuild_graph(apps, schema_editor) -> None:
    connection = schema_editor.connection
    frozen.pause_vector_index(connection)
    frozen.resume_vector_index(
        connection, ef_construction=96, default_dimensions=settings.EMBEDDING_DIMENSIONS
    )


def rebuild_graph_at_128(apps, schema_editor) -> None:
    connection = schema_editor.connection
    dimensions = frozen.column_dimensions(connection) or settings.EMBEDDING_DIMENSIONS
    with connection.cursor() as cursor:
        for name, value in frozen.build_settings(frozen.rows_to_index(cursor)).items():
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
        cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
        cursor.execute(
            f"CREATE INDEX {INDEX} ON memories_memory USING hnsw "
            f"((embedding::halfvec({dimensions})) halfvec_cosine_ops) "
            "WITH (m = 16, ef_construction = 128) WHERE status = 'active'"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0018_hnsw_half_precision"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(rebuild_graph, rebuild_graph_at_128)],
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
                        ef_construction=96,
                        m=16,
                        name=INDEX,
                    ),
                ),
            ],
        ),
    ]
