# The access log (memories/access_log.py): one row per search answered for an
# assistant, with the memory ids it delivered (GIN-indexed for the memory page).

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0022_about"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AccessRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "source",
                    models.CharField(
                        choices=[("api", "API token"), ("service", "Chat service (internal)")],
                        default="api",
                        max_length=16,
                    ),
                ),
                (
                    "memory_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), blank=True, default=list, size=None
                    ),
                ),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "query_preview",
                    models.CharField(blank=True, default="", max_length=80),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="access_records",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "token",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="access_records",
                        to="memories.apitoken",
                    ),
                ),
            ],
            options={
                "ordering": ["-at", "-id"],
                "indexes": [
                    models.Index(fields=["owner", "-at"], name="access_owner_at"),
                    models.Index(fields=["token", "-at"], name="access_token_at"),
                    models.Index(fields=["at"], name="access_at"),
                    django.contrib.postgres.indexes.GinIndex(
                        fields=["memory_ids"], name="access_memory_ids"
                    ),
                ],
            },
        ),
    ]
