"""The owner's entity dictionary, kept by a trigger on the memory table.

Keys are lower(name) — stored names are already trimmed and whitespace-collapsed
by ``normalize_entities`` — in both the dictionary and the owner-scoped index of
migration 0001, whose key function this simplifies to match (and to cost less).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

KEY_FUNCTION = """
CREATE OR REPLACE FUNCTION timothy_owner_entity_keys(owner bigint, refs text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(array_agg(DISTINCT owner::text || ':' || lower(ref)), '{}')
    FROM unnest(refs) AS ref WHERE ref <> ''
$$;
REINDEX INDEX memory_owner_entity_keys_gin;
"""

# Also what a bulk load that bypassed the trigger calls afterwards.
REBUILD_FUNCTION = """
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
"""

TRIGGER = """
CREATE FUNCTION timothy_count_owner_entities() RETURNS trigger LANGUAGE plpgsql AS $$
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

SELECT timothy_rebuild_owner_entities();
"""

BACKWARD = """
DROP TRIGGER memory_counts_owner_entities ON memories_memory;
DROP FUNCTION timothy_count_owner_entities();
DROP FUNCTION timothy_rebuild_owner_entities();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0001_owner_entity_keys"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="OwnerEntity",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.TextField()),
                ("memories", models.IntegerField(default=0)),
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
                "constraints": [
                    models.UniqueConstraint(fields=("owner", "key"), name="owner_entity_unique")
                ],
            },
        ),
        migrations.RunSQL(KEY_FUNCTION, migrations.RunSQL.noop),
        migrations.RunSQL(REBUILD_FUNCTION + TRIGGER, BACKWARD),
    ]
