"""Drop the GIN index on ``entity_refs``: no query reads it.

The entity leg reads the postings (retrieval 0004); the list filters match a
name with ``lower(name) = lower(%s)`` over ``unnest(entity_refs)``, which this
index cannot serve. It still cost an entry per name on every write.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0013_memoryevent_via_choices")]

    operations = [migrations.RemoveIndex(model_name="memory", name="memory_entity_refs_gin")]
