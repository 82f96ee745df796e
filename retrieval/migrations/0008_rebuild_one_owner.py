"""The ``timothy_rebuild_*()`` functions rebuild one owner's part when given an owner.

Called without one they do what they did before, statement for statement;
``retrieval.index.rebuild()`` calls them (``manage.py rebuild_retrieval_index``).
"""

from importlib import import_module

from django.db import migrations

# The postings of a set of memory rows, as the triggers of 0004 write them.
INSERT_OF = import_module("retrieval.migrations.0004_postings").INSERT_OF

ACTIVE = "(SELECT * FROM memories_memory WHERE status = 'active')"
OWNERS_ACTIVE = "(SELECT * FROM memories_memory WHERE status = 'active' AND owner_id = for_owner)"

ENTITIES_OF = """
    INSERT INTO retrieval_ownerentity (owner_id, key, memories)
    SELECT owner_id, key, count(*)
    FROM (
        SELECT DISTINCT m.id, m.owner_id, lower(ref) AS key
        FROM {rows} AS m CROSS JOIN LATERAL unnest(m.entity_refs) AS ref
        WHERE ref <> ''
    ) AS named
    GROUP BY owner_id, key
"""

CORPUS_OF = """
    INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
    SELECT owner_id, count(*), coalesce(sum(length(tsv)), 0)
    FROM {rows} AS m
    GROUP BY owner_id
"""

# Two branches rather than "for_owner IS NULL OR ...": the whole rebuild keeps
# its plan, and one owner's is an index range, whatever plan PL/pgSQL caches.
FORWARD = f"""
DROP FUNCTION timothy_rebuild_postings();
CREATE FUNCTION timothy_rebuild_postings(for_owner bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF for_owner IS NULL THEN
        DELETE FROM retrieval_posting;
        {INSERT_OF.format(rows=ACTIVE)};
    ELSE
        DELETE FROM retrieval_posting WHERE owner_id = for_owner;
        {INSERT_OF.format(rows=OWNERS_ACTIVE)};
    END IF;
END
$$;

DROP FUNCTION timothy_rebuild_owner_entities();
CREATE FUNCTION timothy_rebuild_owner_entities(for_owner bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF for_owner IS NULL THEN
        DELETE FROM retrieval_ownerentity;
        {ENTITIES_OF.format(rows=ACTIVE)};
    ELSE
        DELETE FROM retrieval_ownerentity WHERE owner_id = for_owner;
        {ENTITIES_OF.format(rows=OWNERS_ACTIVE)};
    END IF;
END
$$;

DROP FUNCTION timothy_rebuild_owner_corpus();
CREATE FUNCTION timothy_rebuild_owner_corpus(for_owner bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF for_owner IS NULL THEN
        DELETE FROM retrieval_ownercorpuschange;
        {CORPUS_OF.format(rows=ACTIVE)};
    ELSE
        DELETE FROM retrieval_ownercorpuschange WHERE owner_id = for_owner;
        {CORPUS_OF.format(rows=OWNERS_ACTIVE)};
    END IF;
END
$$;
"""

# 0002, 0004 and 0006's versions.
BACKWARD = f"""
DROP FUNCTION timothy_rebuild_postings(bigint);
CREATE FUNCTION timothy_rebuild_postings() RETURNS void LANGUAGE sql AS $$
    DELETE FROM retrieval_posting;
    {INSERT_OF.format(rows="(SELECT * FROM memories_memory WHERE status = 'active')")};
$$;

DROP FUNCTION timothy_rebuild_owner_entities(bigint);
CREATE FUNCTION timothy_rebuild_owner_entities() RETURNS void LANGUAGE sql AS $$
    DELETE FROM retrieval_ownerentity;
    INSERT INTO retrieval_ownerentity (owner_id, key, memories)
    SELECT owner_id, key, count(*)
    FROM (
        SELECT DISTINCT m.id, m.owner_id, lower(ref) AS key
        FROM memories_memory AS m CROSS JOIN LATERAL unnest(m.entity_refs) AS ref
        WHERE m.status = 'active' AND ref <> ''
    ) AS named
    GROUP BY owner_id, key;
$$;

DROP FUNCTION timothy_rebuild_owner_corpus(bigint);
CREATE FUNCTION timothy_rebuild_owner_corpus() RETURNS void LANGUAGE sql AS $$
    DELETE FROM retrieval_ownercorpuschange;
    INSERT INTO retrieval_ownercorpuschange (owner_id, documents, total_length)
    SELECT owner_id, count(*), coalesce(sum(length(tsv)), 0)
    FROM memories_memory WHERE status = 'active'
    GROUP BY owner_id;
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0007_drop_owner_entity_keys")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
