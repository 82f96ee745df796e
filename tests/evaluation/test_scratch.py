"""The throw-away database: created, migrated, switched to, and always dropped."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from memories.models import Memory
from retrieval.evaluation.scratch_database import SCRATCH_PREFIX, ScratchRefused, scratch_database
from timothy.scratch import database_exists, drop_database

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_switches_to_a_migrated_scratch_database_and_drops_it():
    home = connection.settings_dict["NAME"]
    get_user_model().objects.create(username="stays-home")
    with scratch_database() as name:
        assert name.startswith(SCRATCH_PREFIX)
        assert connection.settings_dict["NAME"] == name
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_database()")
            assert cursor.fetchone()[0] == name
        # Migrated (the memory table exists) and empty: nothing of the home database.
        assert Memory.objects.count() == 0
        assert not get_user_model().objects.filter(username="stays-home").exists()
        owner = get_user_model().objects.create(username="scratch-owner")
        Memory.objects.create(owner=owner, type="episodic", content="scratch only", status="active")
    assert connection.settings_dict["NAME"] == home
    assert not database_exists(name)
    assert Memory.objects.count() == 0
    assert get_user_model().objects.filter(username="stays-home").exists()
    assert not get_user_model().objects.filter(username="scratch-owner").exists()


@pytest.mark.parametrize("interruption", [RuntimeError("boom"), KeyboardInterrupt()])
def test_it_drops_the_scratch_database_when_interrupted(interruption):
    home = connection.settings_dict["NAME"]
    names = []
    with pytest.raises(type(interruption)), scratch_database() as name:
        names.append(name)
        assert database_exists(name)
        raise interruption
    assert names and not database_exists(names[0])
    assert connection.settings_dict["NAME"] == home


def test_it_keeps_a_named_database_and_reuses_it_as_it_was():
    name = "test_scratch_kept"
    try:
        with scratch_database(name, keep=True):
            get_user_model().objects.create(username="kept-owner")
        assert database_exists(name)
        with scratch_database(name, reuse=True, keep=True):
            assert get_user_model().objects.filter(username="kept-owner").exists()
        with scratch_database(name):
            # Without reuse a named database starts empty.
            assert not get_user_model().objects.filter(username="kept-owner").exists()
        assert not database_exists(name)
    finally:
        drop_database(name)


def test_it_refuses_the_service_database():
    with pytest.raises(ScratchRefused), scratch_database(connection.settings_dict["NAME"]):
        pass
    assert database_exists(connection.settings_dict["NAME"])
