"""``RetrievalStamp`` is the retrieval app's model now (retrieval 0009): the
memories app forgets it in its state only. The table, ``memories_retrievalstamp``
(0021), stays where it is with every stamp in it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0026_unarchive_and_page_source"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="RetrievalStamp")],
            database_operations=[],
        ),
    ]
