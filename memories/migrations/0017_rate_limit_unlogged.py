"""The rate limit's counters skip the write-ahead log (memories/throttling.py).

Every API request adds one to its token's counter for the minute. In a logged
table that commit waits for the log to reach the disk: about 4 ms a request
on this project's machine, against 0.05 ms unlogged (docs/benchmarks.md). An
unlogged table is emptied after a crash, which for these counters means a
fresh minute: nothing anyone relies on is lost.
"""

from django.db import migrations

TABLE = "timothy_rate_limit"


class Migration(migrations.Migration):
    dependencies = [("memories", "0016_rate_limit_table")]

    operations = [
        migrations.RunSQL(
            f'ALTER TABLE "{TABLE}" SET UNLOGGED;', reverse_sql=f'ALTER TABLE "{TABLE}" SET LOGGED;'
        )
    ]
