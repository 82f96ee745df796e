"""Idempotency records keep a SHA-256 of each key, never the key itself.

A client may build its keys from what it stores (``remember:<the text>``), and
a redaction must be able to erase that text wherever it went. Existing keys are
hashed in place; a retry after this migration still finds its record.
"""

from django.db import migrations, models

HASH_KEYS = """
UPDATE memories_idempotencyrecord SET key = encode(sha256(convert_to(key, 'UTF8')), 'hex');
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_redaction")]

    operations = [
        migrations.RemoveConstraint(model_name="idempotencyrecord", name="idempotency_owner_key"),
        # The digests cannot be turned back into keys; going back forgets them.
        migrations.RunSQL(HASH_KEYS, "DELETE FROM memories_idempotencyrecord;"),
        migrations.RenameField(
            model_name="idempotencyrecord", old_name="key", new_name="key_digest"
        ),
        migrations.AlterField(
            model_name="idempotencyrecord",
            name="key_digest",
            field=models.CharField(max_length=64),
        ),
        migrations.AddConstraint(
            model_name="idempotencyrecord",
            constraint=models.UniqueConstraint(
                fields=("owner", "key_digest"), name="idempotency_owner_key"
            ),
        ),
    ]
