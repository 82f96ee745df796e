"""Each memory's vector at unit length and half precision, for the exact scan.

``embedding_half`` is a stored generated column (PostgreSQL keeps it from
``embedding``, whatever writes), and the vector leg's covering index
``memory_active_embeddings`` now holds it in place of the float32 vector: an
entry half as wide, so an owner's exact scan reads half the bytes. The scan
shortlists at half precision and scores the shortlist from the float32
vectors, so it returns what it returned before (``retrieval.legs``).

Adding the column rewrites the table, and every index with it: the graph is
dropped first and built once afterwards, sized and parallel, as a bulk load
built it then (``retrieval.index``, frozen in ``_frozen_vector_index``). Going back drops the column and builds the
float32 covering index of retrieval 0005 again.
"""

import django.db.models.functions.comparison
import pgvector.django.halfvec
from django.conf import settings
from django.db import migrations, models

from memories.migrations import _frozen_vector_index as frozen

COVERING_INDEX = "memory_active_embeddings"


def add_half_precision_copy(apps, schema_editor) -> None:
    connection = schema_editor.connection
    dimensions = frozen.column_dimensions(connection) or settings.EMBEDDING_DIMENSIONS
    paused = frozen.pause_vector_index(connection)
    frozen.add_half_precision_scan(connection, dimensions)
    if paused:
        frozen.resume_vector_index(
            connection, ef_construction=96, default_dimensions=settings.EMBEDDING_DIMENSIONS
        )


def drop_half_precision_copy(apps, schema_editor) -> None:
    frozen.drop_half_precision_scan(schema_editor.connection)
    schema_editor.execute(
        f"CREATE INDEX {COVERING_INDEX} ON memories_memory (owner_id, created_at) "
        "INCLUDE (id, type, embedding) WHERE status = 'active' AND embedding IS NOT NULL"
    )


def _half(dimensions: int) -> pgvector.django.halfvec.HalfVectorField:
    return pgvector.django.halfvec.HalfVectorField(dimensions=dimensions, null=True)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0019_hnsw_ef_construction_96"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunPython(add_half_precision_copy, drop_half_precision_copy)
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name=COVERING_INDEX),
                migrations.AddField(
                    model_name="memory",
                    name="embedding_half",
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=django.db.models.functions.comparison.Cast(
                            models.Func("embedding", function="l2_normalize"),
                            _half(settings.EMBEDDING_DIMENSIONS),
                        ),
                        output_field=_half(settings.EMBEDDING_DIMENSIONS),
                    ),
                ),
                migrations.AddIndex(
                    model_name="memory",
                    index=models.Index(
                        condition=models.Q(("embedding__isnull", False), ("status", "active")),
                        fields=["owner", "created_at"],
                        include=("id", "type", "embedding_half"),
                        name=COVERING_INDEX,
                    ),
                ),
            ],
        )
    ]
