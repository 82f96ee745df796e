"""Each version's lifetime as an active memory, for honest replays of the past.

A replay ``as_of`` a moment must see each version from its confirmation until
it was superseded or archived — not today's active memories created by then.
The model's state changes set both moments; this trigger sets them for any
other writer (raw SQL, bulk loads): a row written active is active from its
creation; a status change into or out of active opens or closes the lifetime
unless the writer set it. Existing rows get theirs from the event log.
"""

from django.db import migrations, models

LIFETIME_SQL = """
CREATE FUNCTION timothy_memory_lifetime() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status IN ('active', 'superseded', 'archived') AND NEW.active_since IS NULL THEN
            NEW.active_since := NEW.created_at;
        END IF;
        -- A version written already ended (an import of a chain): until its
        -- successor was written, else its last confirmation or creation.
        IF NEW.status IN ('superseded', 'archived') AND NEW.active_until IS NULL THEN
            NEW.active_until := coalesce(
                (SELECT s.created_at FROM memories_memory s WHERE s.id = NEW.superseded_by_id),
                greatest(NEW.created_at, coalesce(NEW.last_confirmed_at, NEW.created_at)));
        END IF;
    ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
        IF NEW.status = 'active' AND NEW.active_since IS NOT DISTINCT FROM OLD.active_since THEN
            NEW.active_since := now();
            NEW.active_until := NULL;
        ELSIF OLD.status = 'active' AND NEW.active_until IS NOT DISTINCT FROM OLD.active_until THEN
            NEW.active_until := now();
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_lifetime BEFORE INSERT OR UPDATE ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION timothy_memory_lifetime();
"""

BACKFILL_SQL = """
-- Every version that was ever active: from its confirmation, else its creation
-- (written active). A proposal superseded by its edited text never was.
UPDATE memories_memory m SET active_since = coalesce(
    (SELECT min(e.at) FROM memories_memoryevent e
     WHERE e.memory_id = m.id AND e.action = 'confirmed'),
    m.created_at)
WHERE m.status IN ('active', 'archived')
   OR (m.status = 'superseded' AND NOT EXISTS (
        SELECT 1 FROM memories_memoryevent e
        WHERE e.memory_id = m.id AND e.action = 'superseded' AND e.data->>'from' = 'proposed'));

-- ... until it was superseded or archived.
UPDATE memories_memory m SET active_until = coalesce(
    (SELECT min(e.at) FROM memories_memoryevent e
     WHERE e.memory_id = m.id AND e.action IN ('superseded', 'archived')),
    (SELECT s.created_at FROM memories_memory s WHERE s.id = m.superseded_by_id),
    greatest(m.created_at, coalesce(m.last_confirmed_at, m.created_at)))
WHERE m.status IN ('superseded', 'archived') AND m.active_since IS NOT NULL;
"""

REVERSE_SQL = """
DROP TRIGGER memory_lifetime ON memories_memory;
DROP FUNCTION timothy_memory_lifetime();
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_entities_filled_once")]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="active_since",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="active_until",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(LIFETIME_SQL, REVERSE_SQL),
        migrations.RunSQL(BACKFILL_SQL, migrations.RunSQL.noop),
    ]
