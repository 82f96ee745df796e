"""What a memory is about, through the store: written, given, corrected, carried, erased."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from memories import consolidation, redaction
from memories.about import SELF, SET_BY_OWNER, About
from memories.models import Memory, MemoryEvent, known_subjects_of
from tests.base import make_memory
from tests.consolidation.helpers import at_cosine, axis

pytestmark = pytest.mark.django_db


def stored(memory: Memory) -> tuple[str, str, str, str, str]:
    row = Memory.objects.get(pk=memory.pk)
    return (
        row.about_subject,
        row.about_kind,
        row.about_aspect,
        row.about_occasion,
        row.about_set_by,
    )


def test_a_written_memory_stores_what_it_is_about(alice):
    brother = Memory.remember(alice, "My brother Tom lives in Porto.", Memory.Type.SEMANTIC)
    trip = Memory.propose(alice, "Flew to Rome in May 2019.", Memory.Type.EPISODIC)
    # The account is alice: a memory about Alice is about its owner.
    mine = Memory.remember(alice, "Alice cycles to work.", Memory.Type.SEMANTIC)
    assert stored(brother) == ("brother Tom", "person", "home", "", "rules")
    assert stored(trip) == (SELF, SELF, "travel", "2019-05", "rules")
    assert stored(mine) == (SELF, SELF, "commute", "", "rules")


def test_a_new_version_keeps_the_owners_about_while_its_text_stays(alice):
    memory = Memory.remember(alice, "Moved in with Tom.", Memory.Type.SEMANTIC)
    given = About("brother Tom", "person", "home", "", SET_BY_OWNER)
    corrected = memory.edit(about=given, actor=alice, via="page")
    assert corrected.pk != memory.pk and corrected.content == memory.content
    assert stored(corrected) == ("brother Tom", "person", "home", "", "owner")
    retyped = corrected.edit(confidence=0.7)
    assert stored(retyped)[4] == "owner"
    rewritten = retyped.edit("Moved in with Ana.")
    assert stored(rewritten)[4] == "rules"


def test_an_edit_confirms_a_proposal_as_the_new_version_of_another_in_one_step(alice):
    old = Memory.remember(alice, "Cycles to work.", Memory.Type.SEMANTIC)
    proposal = Memory.propose(alice, "Takes the train to wrok.", Memory.Type.SEMANTIC)

    new = proposal.edit("Takes the train to work.", replaces=old, by_owner=True, actor=alice)

    old.refresh_from_db()
    proposal.refresh_from_db()
    assert new.status == Memory.Status.ACTIVE and new.confidence == 1.0
    assert old.status == proposal.status == Memory.Status.SUPERSEDED
    assert old.superseded_by_id == proposal.superseded_by_id == new.pk
    confirmed = MemoryEvent.objects.get(memory=new, action=MemoryEvent.Action.CONFIRMED)
    assert confirmed.data == {
        "from": "proposed",
        "edited": proposal.pk,
        "proposed_confidence": 0.5,
        "proposed_source": "api",
        "replaces": old.pk,
    }
    assert {m.pk for m in Memory.objects.chain(new)} == {old.pk, proposal.pk, new.pk}


def test_an_edit_cannot_replace_a_memory_that_is_no_longer_active(alice):
    old = Memory.remember(alice, "Cycles to work.", Memory.Type.SEMANTIC)
    old.archive()
    proposal = Memory.propose(alice, "Takes the train to work.", Memory.Type.SEMANTIC)
    with pytest.raises(Exception, match="only an active memory is replaced"):
        proposal.edit("Takes the 8:15 train to work.", replaces=old, by_owner=True)
    proposal.refresh_from_db()
    assert proposal.status == Memory.Status.PROPOSED


def test_redaction_erases_the_about_too(alice):
    memory = Memory.remember(alice, "Ana Lopes lives in Lisbon.", Memory.Type.SEMANTIC)
    redaction.redact(memory, reason="not hers to keep", actor=alice)
    subject, kind, aspect, occasion, _ = stored(memory)
    assert (subject, aspect, occasion) == ("", "", "")
    from memories.memory_json import memory_to_dict

    assert memory_to_dict(Memory.objects.get(pk=memory.pk))["about"] is None


def test_export_and_import_carry_the_about(alice, bob, tmp_path):
    memory = Memory.remember(alice, "Moved in with Tom.", Memory.Type.SEMANTIC)
    memory.edit(about=About("brother Tom", "person", "home", "", SET_BY_OWNER))
    path = tmp_path / "alice.jsonl"
    call_command("export_memories", str(path), "--owner", "alice", stdout=StringIO())
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1]["about"]["subject"] == "brother Tom"

    call_command("import_memories", str(path), "--owner", "bob", stdout=StringIO())
    head = Memory.objects.for_owner(bob).get(status=Memory.Status.ACTIVE)
    # An exported correction stays the owner's; the line says so.
    assert stored(head) == ("brother Tom", "person", "home", "", "owner")


def test_import_reads_an_about_where_a_line_has_none_and_refuses_a_bad_one(bob, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps({"content": "My sister Ana lives in Lisbon.", "type": "semantic"})
        + "\n"
        + json.dumps({"content": "Lives in Porto.", "type": "semantic", "about": {"kind": "x"}})
        + "\n"
    )
    err = StringIO()
    with pytest.raises(Exception, match="1 lines failed"):
        call_command("import_memories", str(path), "--owner", "bob", stdout=StringIO(), stderr=err)
    assert "line 2: about.kind must be one of" in err.getvalue()
    [memory] = Memory.objects.for_owner(bob)
    assert stored(memory)[:3] == ("sister Ana", "person", "home")


def test_derive_about_fills_memories_written_before_abouts(alice, bob):
    old = make_memory(alice, "My brother lives in Porto.")
    other = make_memory(bob, "Allergic to penicillin.")
    owners = Memory.remember(alice, "Lives in Lisbon.", Memory.Type.SEMANTIC)
    owners = owners.edit(about=About("self", "self", "the flat", "", SET_BY_OWNER))
    assert stored(old)[1] == ""

    out = StringIO()
    call_command("derive_about", "--owner", "alice", "--dry-run", stdout=out, stderr=StringIO())
    assert "Would write what 1 of 1 memories are about" in out.getvalue()
    assert stored(old)[1] == ""

    out = StringIO()
    call_command("derive_about", "--owner", "alice", stdout=out, stderr=StringIO())
    assert "Wrote what 1 of 1 memories are about" in out.getvalue()
    assert stored(old) == ("brother", "person", "home", "", "rules")
    assert stored(other)[1] == ""  # another owner's, not asked for

    call_command("derive_about", "--all", stdout=StringIO(), stderr=StringIO())
    assert stored(other)[:3] == (SELF, SELF, "allergy")
    assert stored(owners)[2:] == ("the flat", "", "owner")


def test_import_and_derive_about_complete_a_bare_name_by_whom_the_store_names(bob, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(
            json.dumps({"content": text, "type": "semantic"}) + "\n"
            for text in (
                "Her mother Akosua lives with her and the twins.",
                "Akosua sings in the church choir.",
            )
        )
    )
    call_command("import_memories", str(path), "--owner", "bob", stdout=StringIO())
    # Each line is read with whom the store and the lines before it name.
    sung = Memory.objects.for_owner(bob).get(content__startswith="Akosua sings")
    assert stored(sung)[:2] == ("mother Akosua", "person")

    # A memory written before its name was known is completed by the backfill.
    earlier = make_memory(bob, "My mother grows tomatoes.")
    call_command("derive_about", "--owner", "bob", stdout=StringIO(), stderr=StringIO())
    assert stored(earlier)[:2] == ("mother Akosua", "person")


def test_a_write_reads_only_the_subjects_that_complete_its_own(alice):
    for text in (
        "Her mother Akosua lives with her.",
        "Her daughter Anabel Mensah plays netball.",
        "Her friend Ana sings alto.",
    ):
        Memory.remember(alice, text, Memory.Type.SEMANTIC)
    ana = known_subjects_of(alice.pk, About("Ana", "person"))
    # "Anabel" holds "Ana" but not as a word: only the friend is read.
    assert (ana.role_of("Ana"), ana.role_of("Anabel")) == ("friend", "")
    assert known_subjects_of(alice.pk, About("mother", "person")).name_of("mother") == "Akosua"
    assert known_subjects_of(alice.pk, About("Mensah", "person")).role_of("Anabel") == "daughter"


def test_a_name_the_owners_memories_give_them_is_the_owner_on_write_and_import(alice, tmp_path):
    Memory.remember(alice, 'Owner is Gerald "Gerry" Whitlock.', Memory.Type.SEMANTIC)
    Memory.remember(alice, "His friend Bruce sails on Wednesdays.", Memory.Type.SEMANTIC)
    spare = Memory.remember(alice, "Gerry keeps a spare EpiPen in the caravan.", "semantic")
    friend = Memory.remember(alice, "Bruce is a retired harbour pilot.", Memory.Type.SEMANTIC)
    stranger = Memory.remember(alice, "Geraldine runs the village shop.", Memory.Type.SEMANTIC)
    assert stored(spare)[:2] == (SELF, SELF)
    assert stored(friend)[:2] == ("friend Bruce", "person")
    assert stored(stranger)[:2] == ("Geraldine", "person")

    # An import reads the names the lines before it give the owner.
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(
            json.dumps({"content": text, "type": "semantic"}) + "\n"
            for text in ("My name is Priya.", "Priya owns the web app at Loomwork.")
        )
    )
    call_command("import_memories", str(path), "--owner", "alice", stdout=StringIO())
    owns = Memory.objects.for_owner(alice).get(content__startswith="Priya owns")
    assert stored(owns)[:2] == (SELF, SELF)


def test_a_create_reads_whom_the_store_names_once(alice):
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tests.api.conftest import issue_token

    Memory.remember(alice, "Goes by Gerry.", Memory.Type.SEMANTIC)
    client = Client(headers={"Authorization": f"Bearer {issue_token(alice)}"})
    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            "/v1/memories",
            {
                "content": "Gerry keeps a spare EpiPen in the caravan.",
                "type": "semantic",
                "mode": "remember",
            },
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    assert response.json()["about"]["subject"] == SELF
    sent = [query["sql"] for query in queries.captured_queries]
    # The related check and the about it answers with share one reading.
    assert sum('SELECT DISTINCT "memories_memory"."about_subject"' in sql for sql in sent) == 1
    assert sum('"memories_memory"."about_aspect" IN' in sql for sql in sent) == 1


def test_consolidation_never_merges_memories_about_different_subjects(alice):
    mine = make_memory(alice, "Lives in Porto.", embedding=axis(0))
    brother = make_memory(alice, "My brother lives in Porto.", embedding=at_cosine(0, 1, 0.97))
    again = make_memory(alice, "Lives in Porto, Portugal.", embedding=at_cosine(0, 2, 0.97))

    plan = consolidation.plan(alice)

    groups = [sorted(member.id for member in group.members) for group in plan.merges]
    assert groups == [sorted([mine.pk, again.pk])]
    assert brother.pk not in {member.id for group in plan.merges for member in group.members}
