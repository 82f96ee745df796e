"""retrieval/index.py holds the retrieval index's functions and triggers as the
latest migration installs them, and check() notices a function that differs."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval import index

pytestmark = pytest.mark.django_db


def installed_functions() -> dict[str, tuple[str, str]]:
    """Each retrieval index function in the database: its arguments and body."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname, pg_get_function_arguments(oid), prosrc FROM pg_proc "
            "WHERE proname = ANY(%s) AND pg_function_is_visible(oid)",
            [list(index.FUNCTIONS)],
        )
        rows = cursor.fetchall()
    assert len(rows) == len({row[0] for row in rows}), "one version of each"
    return {name: (arguments, index.normalized_sql(body)) for name, arguments, body in rows}


def installed_triggers() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = to_regclass(%s) AND tgname = ANY(%s)",
            [index.MEMORY_TABLE, [trigger.name for trigger in index.TRIGGERS]],
        )
        return dict(cursor.fetchall())


def test_it_defines_every_function_and_trigger_the_check_looks_for():
    assert {function.name for function in index.INSTALLED_FUNCTIONS} == set(index.FUNCTIONS)
    assert len(index.INSTALLED_FUNCTIONS) == len(index.FUNCTIONS)


def test_the_migrations_installed_the_functions_it_holds():
    installed = installed_functions()

    assert {name: body for name, (_, body) in installed.items()} == {
        function.name: index.normalized_sql(function.body) for function in index.INSTALLED_FUNCTIONS
    }
    assert "retrieval.W005" not in [problem.id for problem in index.check()]


def test_its_sql_installs_what_the_migrations_installed():
    functions, triggers = installed_functions(), installed_triggers()
    assert len(triggers) == len(index.TRIGGERS)

    with connection.cursor() as cursor:
        for function in index.INSTALLED_FUNCTIONS:
            cursor.execute(function.create_sql())
        for trigger in index.TRIGGERS:
            cursor.execute(f"DROP TRIGGER {trigger.name} ON {index.MEMORY_TABLE}")
            cursor.execute(index.trigger_create_sql(trigger))

    assert installed_functions() == functions
    assert installed_triggers() == triggers


def test_the_check_warns_of_a_function_changed_by_hand():
    [corpus] = [f for f in index.INSTALLED_FUNCTIONS if f.name == "timothy_count_owner_corpus"]
    with connection.cursor() as cursor:
        cursor.execute(corpus.create_sql().replace("GROUP BY owner_id;", "GROUP BY 1;", 1))

    [problem] = [problem for problem in index.check() if problem.id == "retrieval.W005"]
    assert "timothy_count_owner_corpus()" in problem.msg
