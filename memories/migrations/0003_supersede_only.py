"""Supersede-only, enforced by the database.

A memory's owner, content, type and entities never change in place: an edit is
a new version (supersede) and the old row keeps what it said. Status changes
follow the state machine and nothing else:

    proposed -> active | rejected | superseded (edit-then-confirm)
    active   -> superseded | archived

Whatever runs against the database (a raw UPDATE, a script, the admin), a row
cannot be rewritten or moved to another owner, and a rejected, archived or
superseded memory cannot come back to life.
"""

from django.db import migrations

SUPERSEDE_ONLY_SQL = """
CREATE FUNCTION timothy_memory_supersede_only() RETURNS trigger LANGUAGE plpgsql AS $$
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
    ) THEN
        RAISE EXCEPTION 'memory % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_supersede_only BEFORE UPDATE ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION timothy_memory_supersede_only();
"""

REVERSE_SQL = """
DROP TRIGGER memory_supersede_only ON memories_memory;
DROP FUNCTION timothy_memory_supersede_only();
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0002_daily_consolidation_schedule")]

    operations = [migrations.RunSQL(SUPERSEDE_ONLY_SQL, REVERSE_SQL)]
