"""A covering index for the vector leg's exact scan: each active memory's
embedding, with everything the scan filters and returns, keyed by owner.

An owner who is not searched through the shared HNSW graph (almost every
owner: legs.vector_leg) has all their active vectors compared with the
query's. Read from the table, that costs one ~2 KB row, and in a table where
owners' memories are interleaved one 8 KB page, per memory. Here one owner's
entries sit on contiguous leaf pages, four to a page, and the scan is
index-only (docs/benchmarks.md). The index holds a second copy of every
active embedding: about 1.8 GB at 1,000,000 memories, and a 1.6 KB entry for
every insert or non-HOT update of an active row.
"""

from django.db import migrations

FORWARD = """
CREATE INDEX memory_active_embeddings ON memories_memory (owner_id, created_at)
    INCLUDE (id, type, embedding)
    WHERE status = 'active' AND embedding IS NOT NULL;
"""

BACKWARD = "DROP INDEX memory_active_embeddings;"


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0004_postings")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
