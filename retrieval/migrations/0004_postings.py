"""Postings: the text and entity legs' own inverted index, kept by triggers.

Both legs used to read the memory rows that match the query: about one 8 KB
page per match, since a row carries its 1.5 KB embedding, and the text leg
matched tens of thousands of memories at 100,000 (docs/benchmarks.md). A
posting is one lexeme (kind 'l') or one lower-cased entity name (kind 'e') of
one active memory, with what the legs rank by. The primary key carries it all
(INCLUDE), so a leg reads one owner's postings of the query's terms by an
index-only scan: about a hundred postings per page instead of one match.

Statement-level triggers with transition tables, like the entity dictionary's
(0003): an INSERT adds the postings of its active rows; an UPDATE replaces
those of rows whose status, owner, text, type or dates changed, so stamping
last_retrieved_at costs a join of the changed rows and nothing more.
``timothy_rebuild_postings()`` rebuilds the table for bulk loads that bypassed
the triggers.

The entity leg's owner-scoped GIN index (0001) has no reader left; dropping it
gives back part of what the postings cost each write.
"""

from django.db import migrations, models

# The postings of the rows called m (active ones only, as the callers choose).
POSTINGS_OF = """
    SELECT m.owner_id, 'l' AS kind, t.lexeme AS term, m.id AS memory_id,
           coalesce(array_length(t.positions, 1), 1) AS frequency, length(m.tsv) AS length,
           m.type, m.created_at, m.last_confirmed_at
    FROM {rows} AS m CROSS JOIN LATERAL unnest(m.tsv) AS t
    UNION ALL
    SELECT DISTINCT m.owner_id, 'e', lower(ref), m.id, 1, 0, m.type, m.created_at,
           m.last_confirmed_at
    FROM {rows} AS m CROSS JOIN LATERAL unnest(m.entity_refs) AS ref
    WHERE ref <> ''
"""

COLUMNS = "owner_id, kind, term, memory_id, frequency, length, type, created_at, last_confirmed_at"
INDEXED = "id, owner_id, tsv, entity_refs, type, created_at, last_confirmed_at"

# The active versions an UPDATE removed (side -1) or brought (side 1). A row
# whose indexed columns are the same before and after (an active row that
# only got a new last_retrieved_at, say) cancels out. Grouped rather than
# joined on id, like the entity dictionary's trigger (0003).
CHANGED = f"""
    (SELECT {INDEXED} FROM (
        SELECT {INDEXED}, -1 AS side FROM old_rows WHERE status = 'active'
        UNION ALL
        SELECT {INDEXED}, 1 FROM new_rows WHERE status = 'active'
    ) AS versions GROUP BY {INDEXED} HAVING sum(side) {{sign}} 0)
"""

DELETE_LEAVING = f"""
    DELETE FROM retrieval_posting AS p
    USING ({POSTINGS_OF.format(rows=CHANGED.format(sign="<"))}) AS leaving
    WHERE (p.owner_id, p.kind, p.term, p.memory_id)
          = (leaving.owner_id, leaving.kind, leaving.term, leaving.memory_id)
"""

INSERT_OF = f"INSERT INTO retrieval_posting ({COLUMNS}) {POSTINGS_OF}"

FORWARD = f"""
CREATE TABLE retrieval_posting (
    owner_id bigint NOT NULL,
    kind varchar(1) NOT NULL,
    term text NOT NULL,
    memory_id bigint NOT NULL,
    frequency integer NOT NULL,
    length integer NOT NULL,
    type varchar(16) NOT NULL,
    created_at timestamptz NOT NULL,
    last_confirmed_at timestamptz NULL,
    CONSTRAINT retrieval_posting_pk PRIMARY KEY (owner_id, kind, term, memory_id)
        INCLUDE (frequency, length, type, created_at, last_confirmed_at)
);

-- EXECUTE plans each statement for its own transition tables: PL/pgSQL would
-- keep the plan made for the first statement (one row, say) for every later
-- one (ten thousand).
CREATE FUNCTION timothy_index_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE $sql$
            {INSERT_OF.format(rows="(SELECT * FROM new_rows WHERE status = 'active')")}
        $sql$;
    ELSE
        EXECUTE $sql$ {DELETE_LEAVING} $sql$;
        EXECUTE $sql$ {INSERT_OF.format(rows=CHANGED.format(sign=">"))} $sql$;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_indexes_postings
AFTER INSERT ON memories_memory
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION timothy_index_postings();

CREATE TRIGGER memory_indexes_postings_on_update
AFTER UPDATE ON memories_memory
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION timothy_index_postings();

-- What a bulk load that bypassed the triggers calls afterwards.
CREATE FUNCTION timothy_rebuild_postings() RETURNS void LANGUAGE sql AS $$
    DELETE FROM retrieval_posting;
    {INSERT_OF.format(rows="(SELECT * FROM memories_memory WHERE status = 'active')")};
$$;

SELECT timothy_rebuild_postings();

DROP INDEX memory_owner_entity_keys_gin;
"""

BACKWARD = """
CREATE INDEX memory_owner_entity_keys_gin ON memories_memory
    USING gin (timothy_owner_entity_keys(owner_id, entity_refs))
    WHERE status = 'active';
DROP TRIGGER memory_indexes_postings_on_update ON memories_memory;
DROP TRIGGER memory_indexes_postings ON memories_memory;
DROP FUNCTION timothy_rebuild_postings();
DROP FUNCTION timothy_index_postings();
DROP TABLE retrieval_posting;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0003_owner_entities_per_statement")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.CreateModel(
                    name="Posting",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "owner_id",
                                "kind",
                                "term",
                                "memory_id",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("owner_id", models.BigIntegerField()),
                        (
                            "kind",
                            models.CharField(
                                choices=[("l", "Lexeme"), ("e", "Entity")], max_length=1
                            ),
                        ),
                        ("term", models.TextField()),
                        ("memory_id", models.BigIntegerField()),
                        ("frequency", models.IntegerField()),
                        ("length", models.IntegerField()),
                        ("type", models.CharField(max_length=16)),
                        ("created_at", models.DateTimeField()),
                        ("last_confirmed_at", models.DateTimeField(null=True)),
                    ],
                ),
            ],
        ),
    ]
