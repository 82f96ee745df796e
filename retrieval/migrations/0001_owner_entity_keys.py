"""An index the entity leg can use: each active memory's entities as owner-scoped,
lower-cased keys ("42:ann"), so that a lookup touches one owner's matches only
and matching ignores case.
"""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION timothy_owner_entity_keys(owner bigint, refs text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(array_agg(DISTINCT owner::text || ':' || key), '{}')
    FROM (
        SELECT regexp_replace(btrim(lower(ref)), '\s+', ' ', 'g') AS key FROM unnest(refs) AS ref
    ) AS keys
    WHERE key <> ''
$$;

CREATE INDEX memory_owner_entity_keys_gin ON memories_memory
    USING gin (timothy_owner_entity_keys(owner_id, entity_refs))
    WHERE status = 'active';
"""

BACKWARD = """
DROP INDEX memory_owner_entity_keys_gin;
DROP FUNCTION timothy_owner_entity_keys(bigint, text[]);
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
