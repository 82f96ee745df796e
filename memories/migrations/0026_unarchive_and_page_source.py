"""The pages' Undo of an archive, and the owner's own source.

The supersede-only trigger (0008's body) allows one more status change,
archived → active: the owner takes back an archive (Memory.unarchive), logged
as an ``unarchived`` event. A memory written or confirmed by the owner on the
pages (edit-then-confirm, an edit) has source ``page``.
"""

from django.db import migrations, models

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
        OR (OLD.status = 'archived' AND NEW.status = 'active')
        OR (OLD.status = 'rejected' AND NEW.status = 'proposed')
    ) THEN
        RAISE EXCEPTION 'memory % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""

# 0008's body, for going back.
SUPERSEDE_ONLY_REVERSE_SQL = """
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


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0025_disk_erase"),
    ]

    operations = [
        migrations.AlterField(
            model_name="memory",
            name="source",
            field=models.CharField(
                choices=[
                    ("remember", "Remember (owner's explicit fact)"),
                    ("extraction", "Extraction from a conversation"),
                    ("api", "API"),
                    ("consolidation", "Consolidation"),
                    ("import", "Import"),
                    ("page", "Written or confirmed by the owner on the pages"),
                ],
                default="api",
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
                    ("unarchived", "Back from the archive"),
                    ("superseded", "Superseded"),
                    ("version", "New version"),
                    ("merged", "Merged"),
                    ("decayed", "Confidence decayed"),
                    ("redacted", "Redacted"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunSQL(SUPERSEDE_ONLY_SQL, SUPERSEDE_ONLY_REVERSE_SQL),
    ]
