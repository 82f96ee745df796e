"""The owner's entity dictionary, counted once per statement instead of per row.

Row by row, a 100,000-line import bumped the same few counters (the owner's own
name is in most memories) tens of thousands of times in one transaction and took
more than 10 minutes. Statement-level triggers see every row the statement wrote
in a transition table, add up one net change per (owner, key) and apply it with
one upsert, so a COPY of any size touches each counter once.

A trigger with transition tables takes one event and no column list, hence one
trigger for INSERT and one for UPDATE; the UPDATE one drops rows whose status,
entity_refs and owner_id did not change before anything else, so stamping
last_retrieved_at and the like never writes to the dictionary. Deletes are refused by
``memory_never_deleted`` (memories 0001), so there is no DELETE trigger.

As before, a key that no active memory names any more keeps its row with a count
of 0 (the entity leg reads ``memories > 0``); ``timothy_rebuild_owner_entities()``
recounts from scratch and leaves those rows out.
"""

from django.db import migrations

# Keys as in 0002: lower(name), once per memory however many spellings it has,
# empty names left out.
COUNT_FUNCTION = """
CREATE OR REPLACE FUNCTION timothy_count_owner_entities() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- In (owner, key) order, so that concurrent writers lock the same rows in
        -- the same order.
        INSERT INTO retrieval_ownerentity AS e (owner_id, key, memories)
        SELECT owner_id, key, count(*)
        FROM (
            SELECT DISTINCT n.id, n.owner_id, lower(ref) AS key
            FROM new_rows AS n CROSS JOIN LATERAL unnest(n.entity_refs) AS ref
            WHERE n.status = 'active' AND ref <> ''
        ) AS named
        GROUP BY owner_id, key
        ORDER BY owner_id, key
        ON CONFLICT (owner_id, key) DO UPDATE SET memories = e.memories + excluded.memories;
    ELSE
        -- Only active versions count. A row whose owner and refs are the same
        -- before and after (an active row that only got a new last_retrieved_at,
        -- say) cancels out; what is left are the leaving (-1) and arriving (+1)
        -- versions of the rows that changed. Grouped rather than joined on id:
        -- PL/pgSQL keeps the plan made for the first statement's transition
        -- tables, and a nested loop planned for one row would go quadratic on the
        -- next statement that updates ten thousand.
        WITH changed AS (
            SELECT id, owner_id, entity_refs, sum(side) AS side
            FROM (
                SELECT id, owner_id, entity_refs, -1 AS side
                FROM old_rows WHERE status = 'active'
                UNION ALL
                SELECT id, owner_id, entity_refs, 1
                FROM new_rows WHERE status = 'active'
            ) AS versions
            GROUP BY id, owner_id, entity_refs
            HAVING sum(side) <> 0
        ), named AS (
            SELECT DISTINCT c.id, c.side, c.owner_id, lower(ref) AS key
            FROM changed AS c CROSS JOIN LATERAL unnest(c.entity_refs) AS ref
            WHERE ref <> ''
        ), net AS (
            SELECT owner_id, key, sum(side)::int AS change
            FROM named GROUP BY owner_id, key HAVING sum(side) <> 0
        )
        INSERT INTO retrieval_ownerentity AS e (owner_id, key, memories)
        SELECT owner_id, key, change FROM net
        -- Like 0002, a decrement only touches a key that is in the dictionary.
        WHERE change > 0 OR EXISTS (
            SELECT 1 FROM retrieval_ownerentity AS d
            WHERE d.owner_id = net.owner_id AND d.key = net.key
        )
        ORDER BY owner_id, key
        ON CONFLICT (owner_id, key) DO UPDATE SET memories = e.memories + excluded.memories;
    END IF;
    RETURN NULL;
END
$$;
"""

FORWARD = (
    """
DROP TRIGGER memory_counts_owner_entities ON memories_memory;
"""
    + COUNT_FUNCTION
    + """
-- The INSERT trigger keeps 0002's name: bench_recall switches it off by name
-- around its bulk COPY.
CREATE TRIGGER memory_counts_owner_entities
AFTER INSERT ON memories_memory
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION timothy_count_owner_entities();

CREATE TRIGGER memory_counts_owner_entities_on_update
AFTER UPDATE ON memories_memory
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION timothy_count_owner_entities();
"""
)

# 0002's row-level trigger, word for word.
BACKWARD = """
DROP TRIGGER memory_counts_owner_entities_on_update ON memories_memory;
DROP TRIGGER memory_counts_owner_entities ON memories_memory;

CREATE OR REPLACE FUNCTION timothy_count_owner_entities() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = 'active' THEN
        UPDATE retrieval_ownerentity AS e SET memories = e.memories - 1
        WHERE e.owner_id = OLD.owner_id
          AND e.key IN (SELECT lower(ref) FROM unnest(OLD.entity_refs) AS ref);
    END IF;
    IF NEW.status = 'active' THEN
        -- In key order, so that concurrent writers lock the same rows in the same order.
        INSERT INTO retrieval_ownerentity (owner_id, key, memories)
        SELECT NEW.owner_id, key, 1
        FROM (SELECT DISTINCT lower(ref) AS key FROM unnest(NEW.entity_refs) AS ref) AS keys
        WHERE key <> ''
        ORDER BY key
        ON CONFLICT (owner_id, key) DO UPDATE SET memories = retrieval_ownerentity.memories + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_counts_owner_entities
AFTER INSERT OR UPDATE OF status, entity_refs, owner_id ON memories_memory
FOR EACH ROW EXECUTE FUNCTION timothy_count_owner_entities();
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0002_owner_entities")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
