"""Redaction: a memory's text can be erased for good, and only that way.

A new terminal status, redacted, reachable from every status. The row keeps
its place in its chain (a redacted row may keep its successor), and the
database allows it no text: content is the stub, no entities, no embedding.

The supersede-only trigger (0003, with 0005's restore and 0006's entities
filled once) gets one more rule, in its own block before the others: a redaction is the one rewrite of content allowed, and only to the stub;
a redacted row's owner, content, type, entities, embedding, metadata, status and
successor never change again.

The event log stays append-only, with one exception: while the transaction
has set ``timothy.redacting_owner`` to a row's owner, that row's reason may
become the stub and any string in its data may become the stub, and nothing
else may change (memories/redaction.py).
"""

from django.conf import settings
from django.db import migrations, models

# The redaction block first; the rest is the body as 0005 (restore) and 0006
# (entities filled once) left it.
SUPERSEDE_ONLY_SQL = """
CREATE OR REPLACE FUNCTION timothy_memory_supersede_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Redaction (issue 17). First, so that no later rule can reopen a redacted row.
    IF OLD.status = 'redacted' THEN
        IF NEW.owner_id IS DISTINCT FROM OLD.owner_id
            OR NEW.content IS DISTINCT FROM OLD.content
            OR NEW.type IS DISTINCT FROM OLD.type
            OR NEW.entity_refs IS DISTINCT FROM OLD.entity_refs
            OR NEW.embedding IS DISTINCT FROM OLD.embedding
            OR NEW.metadata IS DISTINCT FROM OLD.metadata
            OR NEW.status IS DISTINCT FROM OLD.status
            OR NEW.superseded_by_id IS DISTINCT FROM OLD.superseded_by_id THEN
            RAISE EXCEPTION 'memory % is redacted: it can never be written again', OLD.id
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.status = 'redacted' THEN
        IF NEW.owner_id IS DISTINCT FROM OLD.owner_id
            OR NEW.type IS DISTINCT FROM OLD.type
            OR NEW.superseded_by_id IS DISTINCT FROM OLD.superseded_by_id
            OR NEW.content IS DISTINCT FROM '[redacted]'
            OR NEW.entity_refs IS DISTINCT FROM '{}'::text[]
            OR NEW.embedding IS NOT NULL THEN
            RAISE EXCEPTION 'memory % can only be redacted to the stub (no entities, no embedding, same owner, type and successor)',
                OLD.id USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
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

# 0006's body, for going back.
SUPERSEDE_ONLY_REVERSE_SQL = """
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

# Whether ``new`` is ``old`` with some strings replaced by the stub, and nothing else.
EVENT_SCRUB_SQL = """
CREATE FUNCTION timothy_is_scrub_of(old jsonb, new jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k text;
    i integer;
BEGIN
    IF old IS NOT DISTINCT FROM new THEN
        RETURN true;
    END IF;
    IF old IS NULL OR new IS NULL THEN
        RETURN false;
    END IF;
    IF jsonb_typeof(old) = 'string' THEN
        RETURN new = to_jsonb('[redacted]'::text);
    END IF;
    IF jsonb_typeof(old) = 'object' AND jsonb_typeof(new) = 'object' THEN
        IF ARRAY(SELECT jsonb_object_keys(old) ORDER BY 1)
            IS DISTINCT FROM ARRAY(SELECT jsonb_object_keys(new) ORDER BY 1) THEN
            RETURN false;
        END IF;
        FOR k IN SELECT jsonb_object_keys(old) LOOP
            IF NOT timothy_is_scrub_of(old -> k, new -> k) THEN
                RETURN false;
            END IF;
        END LOOP;
        RETURN true;
    END IF;
    IF jsonb_typeof(old) = 'array' AND jsonb_typeof(new) = 'array' THEN
        IF jsonb_array_length(old) <> jsonb_array_length(new) THEN
            RETURN false;
        END IF;
        FOR i IN 0 .. jsonb_array_length(old) - 1 LOOP
            IF NOT timothy_is_scrub_of(old -> i, new -> i) THEN
                RETURN false;
            END IF;
        END LOOP;
        RETURN true;
    END IF;
    RETURN false;
END $$;

CREATE FUNCTION timothy_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE'
        AND current_setting('timothy.redacting_owner', true) = OLD.owner_id::text
        AND NEW.id = OLD.id
        AND NEW.memory_id = OLD.memory_id
        AND NEW.owner_id = OLD.owner_id
        AND NEW.action = OLD.action
        AND NEW.actor_id IS NOT DISTINCT FROM OLD.actor_id
        AND NEW.via = OLD.via
        AND NEW.at = OLD.at
        AND (NEW.reason = OLD.reason OR NEW.reason = '[redacted]')
        AND timothy_is_scrub_of(OLD.data, NEW.data) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'rows of % are append-only', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END $$;

DROP TRIGGER event_append_only ON memories_memoryevent;
CREATE TRIGGER event_append_only BEFORE UPDATE OR DELETE ON memories_memoryevent
    FOR EACH ROW EXECUTE FUNCTION timothy_event_append_only();
"""

EVENT_SCRUB_REVERSE_SQL = """
DROP TRIGGER event_append_only ON memories_memoryevent;
CREATE TRIGGER event_append_only BEFORE UPDATE OR DELETE ON memories_memoryevent
    FOR EACH ROW EXECUTE FUNCTION timothy_forbid_update();
DROP FUNCTION timothy_event_append_only();
DROP FUNCTION timothy_is_scrub_of(jsonb, jsonb);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0007_active_lifetime"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="memory",
            name="memory_superseded_has_successor",
        ),
        migrations.RemoveConstraint(
            model_name="memory",
            name="memory_status_known",
        ),
        migrations.AlterField(
            model_name="memory",
            name="status",
            field=models.CharField(
                choices=[
                    ("proposed", "Proposed"),
                    ("active", "Active"),
                    ("rejected", "Rejected"),
                    ("superseded", "Superseded"),
                    ("archived", "Archived"),
                    ("redacted", "Redacted"),
                ],
                default="proposed",
                max_length=16,
            ),
        ),
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
                    ("redacted", "Redacted"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status", "superseded"), ("superseded_by__isnull", False)),
                    ("status", "redacted"),
                    models.Q(
                        models.Q(("status__in", ["superseded", "redacted"]), _negated=True),
                        ("superseded_by__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="memory_superseded_has_successor",
                violation_error_message="A superseded memory needs a successor; no other memory may have one.",
            ),
        ),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status", "redacted"), _negated=True),
                    models.Q(
                        ("content", "[redacted]"), ("embedding__isnull", True), ("entity_refs", [])
                    ),
                    _connector="OR",
                ),
                name="memory_redacted_is_blank",
                violation_error_message="A redacted memory keeps no text, entities or embedding.",
            ),
        ),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "status__in",
                        ["proposed", "active", "rejected", "superseded", "archived", "redacted"],
                    )
                ),
                name="memory_status_known",
            ),
        ),
        migrations.RunSQL(SUPERSEDE_ONLY_SQL, SUPERSEDE_ONLY_REVERSE_SQL),
        migrations.RunSQL(EVENT_SCRUB_SQL, EVENT_SCRUB_REVERSE_SQL),
    ]
