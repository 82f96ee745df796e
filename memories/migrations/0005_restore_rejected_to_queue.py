"""A rejected memory can be restored to the confirmation queue.

The supersede-only trigger (0003) gains exactly one transition,
rejected -> proposed, so that a rejection can be undone; everything else it
enforces stays: no row is rewritten in place, and an archived or superseded
memory never comes back. The event log records each restore ("restored").
"""

from django.db import migrations, models

TRIGGER_FUNCTION = """
CREATE OR REPLACE FUNCTION timothy_memory_supersede_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.owner_id IS DISTINCT FROM OLD.owner_id
        OR NEW.content IS DISTINCT FROM OLD.content
        OR NEW.type IS DISTINCT FROM OLD.type
        OR NEW.entity_refs IS DISTINCT FROM OLD.entity_refs THEN
        RAISE EXCEPTION 'memory % cannot be rewritten in place: supersede it with a new version',
            OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'proposed' AND NEW.status IN ('active', 'rejected', 'superseded'))
        OR (OLD.status = 'active' AND NEW.status IN ('superseded', 'archived'))
        {restore}
    ) THEN
        RAISE EXCEPTION 'memory % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""

ALLOW_RESTORE = TRIGGER_FUNCTION.format(
    restore="OR (OLD.status = 'rejected' AND NEW.status = 'proposed')"
)
FORBID_RESTORE = TRIGGER_FUNCTION.format(restore="")


class Migration(migrations.Migration):
    dependencies = [("memories", "0004_hnsw_ef_construction_128")]

    operations = [
        migrations.AlterField(
            model_name="memoryevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("proposed", "Proposed"),
                    ("created", "Created"),
                    ("imported", "Imported"),
                    ("confirmed", "Confirmed"),
                    ("reconfirmed", "Re-confirmed"),
                    ("rejected", "Rejected"),
                    ("restored", "Restored to the queue"),
                    ("archived", "Archived"),
                    ("superseded", "Superseded"),
                    ("version", "New version"),
                    ("merged", "Merged"),
                    ("decayed", "Confidence decayed"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunSQL(ALLOW_RESTORE, FORBID_RESTORE),
    ]
