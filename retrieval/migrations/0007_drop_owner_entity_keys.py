"""Drop ``timothy_owner_entity_keys()``: its only reader, the owner-scoped GIN
index of 0001, went with the postings (0004), and nothing calls it since.
"""

from django.db import migrations

# 0002's version, word for word.
KEY_FUNCTION = """
CREATE FUNCTION timothy_owner_entity_keys(owner bigint, refs text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT coalesce(array_agg(DISTINCT owner::text || ':' || lower(ref)), '{}')
    FROM unnest(refs) AS ref WHERE ref <> ''
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0006_owner_corpus")]

    operations = [
        migrations.RunSQL("DROP FUNCTION timothy_owner_entity_keys(bigint, text[]);", KEY_FUNCTION)
    ]
