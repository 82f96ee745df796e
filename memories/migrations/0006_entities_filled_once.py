"""A memory written without entities may have them filled in, once.

The store finds entities for a memory that came without any (retrieval/
entities.py); ``manage.py find_entities`` does the same for memories written
before that. Everything else of 0003 and 0005 stands: content, type, owner and any
entities a memory already has never change in place.
"""

from django.db import migrations

FUNCTION_SQL = """
CREATE OR REPLACE FUNCTION timothy_memory_supersede_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.owner_id IS DISTINCT FROM OLD.owner_id
        OR NEW.content IS DISTINCT FROM OLD.content
        OR NEW.type IS DISTINCT FROM OLD.type
        OR (NEW.entity_refs IS DISTINCT FROM OLD.entity_refs
            AND cardinality(OLD.entity_refs) > 0) THEN
        RAISE EXCEPTION 'memory % cannot be rewritten in place: supersede it with a new version',
            OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
        (OLD.status = 'proposed' AND NEW.status IN ('active', 'rejected', 'superseded'))
        OR (OLD.status = 'active' AND NEW.status IN ('superseded', 'archived'))
        OR (OLD.status = 'rejected' AND NEW.status = 'proposed')
    ) THEN
        RAISE EXCEPTION 'memory % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""

REVERSE_SQL = """
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
        OR (OLD.status = 'rejected' AND NEW.status = 'proposed')
    ) THEN
        RAISE EXCEPTION 'memory % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0005_restore_rejected_to_queue")]

    operations = [migrations.RunSQL(FUNCTION_SQL, REVERSE_SQL)]
