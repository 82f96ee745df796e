"""Per-owner corpus sums for BM25 (N and the total memory length), kept by triggers.

The text leg's BM25 needs the owner's number of active memories and their
average length. Counted from the memories that is a read of every active row
of the owner: 118 ms at 100,000 memories, and one page per memory where
owners' rows are interleaved, so it was cached for a minute and the first query
of each owner in a minute paid it. Summing these rows is one index-only read.

Statement-level triggers with transition tables, like the entity dictionary's
(0003): the active rows a statement removed count -1, those it brought +1, and
one row per owner records the net change. A row that stayed active with the
same text (a last_retrieved_at stamp) cancels out and records nothing. Rows are
appended, never updated, so concurrent writers (an open import included) never
wait on them; ``timothy_compact_owner_corpus()`` (the daily job) folds each
owner's rows into one and ``timothy_rebuild_owner_corpus()`` recounts from scratch.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

FORWARD = """
CREATE FUNCTION timothy_count_owner_corpus() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
        SELECT owner_id, count(*), coalesce(sum(length(tsv)), 0)
        FROM new_rows WHERE status = 'active'
        GROUP BY owner_id;
    ELSE
        INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
        SELECT owner_id, sum(side), coalesce(sum(side * length(tsv)), 0)
        FROM (
            SELECT owner_id, tsv, -1 AS side FROM old_rows WHERE status = 'active'
            UNION ALL
            SELECT owner_id, tsv, 1 FROM new_rows WHERE status = 'active'
        ) AS versions
        GROUP BY owner_id
        HAVING sum(side) <> 0 OR sum(side * length(tsv)) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_counts_owner_corpus
AFTER INSERT ON memories_memory
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION timothy_count_owner_corpus();

CREATE TRIGGER memory_counts_owner_corpus_on_update
AFTER UPDATE ON memories_memory
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION timothy_count_owner_corpus();

-- One row per owner. Only rows committed before it starts are folded: a
-- writer's row still in flight stays as it is and is folded the next time.
CREATE FUNCTION timothy_compact_owner_corpus() RETURNS void LANGUAGE sql AS $$
    WITH folded AS (
        DELETE FROM retrieval_ownercorpuschange
        RETURNING owner_id, documents, total_length
    )
    INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
    SELECT owner_id, sum(documents), sum(total_length)
    FROM folded
    GROUP BY owner_id
    HAVING sum(documents) <> 0 OR sum(total_length) <> 0;
$$;

-- What a bulk load that bypassed the triggers calls afterwards.
CREATE FUNCTION timothy_rebuild_owner_corpus() RETURNS void LANGUAGE sql AS $$
    DELETE FROM retrieval_ownercorpuschange;
    INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
    SELECT owner_id, count(*), coalesce(sum(length(tsv)), 0)
    FROM memories_memory WHERE status = 'active'
    GROUP BY owner_id;
$$;

SELECT timothy_rebuild_owner_corpus();
"""

BACKWARD = """
DROP TRIGGER memory_counts_owner_corpus_on_update ON memories_memory;
DROP TRIGGER memory_counts_owner_corpus ON memories_memory;
DROP FUNCTION timothy_rebuild_owner_corpus();
DROP FUNCTION timothy_compact_owner_corpus();
DROP FUNCTION timothy_count_owner_corpus();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0005_active_embeddings"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="OwnerCorpusChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("documents", models.BigIntegerField()),
                ("total_length", models.BigIntegerField()),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["owner"],
                        include=["documents", "total_length"],
                        name="owner_corpus_change_owner",
                    )
                ],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
