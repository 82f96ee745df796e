"""The per-token rate limit's counter table (memories/throttling.py).

Django's database-cache layout, as ``manage.py createcachetable`` makes it for
the ``rate_limit`` cache alias: part of the schema, so no request ever creates
it. ``IF NOT EXISTS``: `make run` made it with createcachetable before.
"""

from django.db import migrations

TABLE = "timothy_rate_limit"

CREATE = f"""
CREATE TABLE IF NOT EXISTS "{TABLE}" (
    "cache_key" varchar(255) NOT NULL PRIMARY KEY,
    "value" text NOT NULL,
    "expires" timestamp with time zone NOT NULL
);
CREATE INDEX IF NOT EXISTS "{TABLE}_expires" ON "{TABLE}" ("expires");
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0015_active_embeddings_in_meta")]

    operations = [migrations.RunSQL(CREATE, reverse_sql=f'DROP TABLE IF EXISTS "{TABLE}";')]
