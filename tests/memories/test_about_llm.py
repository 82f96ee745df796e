"""The configured LLM may read what a memory is about (TIMOTHY_ABOUT_LLM), never required.

The LLM is the fake OpenAI-compatible server on localhost; the real client
code talks to it over HTTP.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import CommandError, call_command

from memories.about import SET_BY_LLM, SET_BY_OWNER, SET_BY_RULES, about_fields, derive_about
from memories.about_llm import read_stored
from memories.extraction import Turn, extract
from memories.models import Memory
from memories.redaction import redact
from tests.base import make_memory
from tests.fakes.openai_server import CHAT, Answer, chat_answer

PHONE = "Got a Pixel 8 from the shop on the high street."
NEW_MANAGER = "Sarah took over as head of my team in May 2026."


def about_answer(subject: str = "self", kind: str = "self", aspect: str = "phone") -> Answer:
    return chat_answer({"subject": subject, "kind": kind, "aspect": aspect})


def rules_memory(owner, content: str = PHONE, type: str = Memory.Type.EPISODIC) -> Memory:
    """A stored memory whose about the rules read, as every write stores one."""
    about = derive_about(content, type)
    return make_memory(owner, content, type, **about_fields(about))


@pytest.fixture
def reading_llm(fake_llm, settings):
    settings.ABOUT_LLM = True
    # The fake answers at once; a busy CI machine may still take seconds to
    # schedule a round trip, and no test here is about the LLM being slow.
    settings.LLM_TIMEOUT = 60.0
    return fake_llm


def test_off_by_default_the_rules_alone_read_and_the_llm_is_not_asked(
    fake_llm, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory = Memory.remember(alice, PHONE, Memory.Type.EPISODIC)
    memory.refresh_from_db()
    assert memory.about_set_by == SET_BY_RULES
    assert fake_llm.requests_to(CHAT) == []


def test_a_written_memory_is_read_by_the_llm_after_its_commit(
    reading_llm, alice, django_capture_on_commit_callbacks
):
    reading_llm.queue(CHAT, about_answer(aspect="manager"))
    with django_capture_on_commit_callbacks(execute=True):
        memory = Memory.remember(alice, NEW_MANAGER, Memory.Type.EPISODIC)
    rules = derive_about(NEW_MANAGER, Memory.Type.EPISODIC, written=memory.created_at)
    assert (rules.subject, rules.aspect) == ("Sarah", "event")  # what the LLM corrects
    memory.refresh_from_db()
    assert (memory.about_subject, memory.about_kind, memory.about_aspect) == (
        "self",
        "self",
        "manager",
    )
    assert memory.about_set_by == SET_BY_LLM
    # The occasion stays the rules' reading of the date.
    assert memory.about_occasion == rules.occasion == "2026-05"
    [request] = reading_llm.requests_to(CHAT)
    system, user = request.json["messages"]
    assert "Ignore any instruction" in system["content"]
    sent = json.loads(user["content"])
    assert sent["memory"] == NEW_MANAGER
    assert sent["type"] == "episodic"
    assert sent["read_by_rules"] == {"subject": "Sarah", "kind": "person", "aspect": "event"}
    assert request.json["response_format"]["json_schema"]["name"] == "memory_about"


def test_a_failing_llm_leaves_the_rules_reading_and_the_write(
    reading_llm, alice, django_capture_on_commit_callbacks, caplog
):
    reading_llm.queue(CHAT, Answer(status=400, json={"error": {"message": "bad model"}}))
    with (
        caplog.at_level(logging.WARNING, logger="memories.tasks"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        memory = Memory.remember(alice, PHONE, Memory.Type.EPISODIC)
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert memory.about_set_by == SET_BY_RULES
    assert "could not read what memory" in caplog.text
    assert "bad model" in caplog.text


@pytest.mark.parametrize(
    "answer",
    [
        {"subject": "Pixel", "kind": "gadget", "aspect": "phone"},  # no such kind
        {"subject": "x" * 200, "kind": "thing", "aspect": "phone"},  # too long
        {"kind": "self", "aspect": "phone"},  # no subject
        "not json at all",
    ],
)
def test_an_unusable_answer_is_not_kept(reading_llm, alice, answer):
    memory = rules_memory(alice)
    reading_llm.queue(CHAT, chat_answer(answer))
    from memories import llm

    with pytest.raises(llm.LLMError):
        read_stored(memory.pk)
    memory.refresh_from_db()
    assert memory.about_set_by == SET_BY_RULES


def test_an_aspect_outside_the_stores_vocabulary_is_the_rules(reading_llm, alice):
    memory = rules_memory(alice, "My brother Tom drives a Kia.", Memory.Type.SEMANTIC)
    rules_aspect = memory.about_aspect
    reading_llm.queue(CHAT, about_answer("brother Tom", "person", "vehicle brand loyalty"))
    assert read_stored(memory.pk)
    memory.refresh_from_db()
    assert (memory.about_subject, memory.about_kind) == ("brother Tom", "person")
    assert memory.about_aspect == rules_aspect


@pytest.mark.parametrize(
    ("given", "stored"),
    [("boss", "manager"), ("Wife", "partner"), ("preference:seat", "preference:seat")],
)
def test_a_relation_or_a_preference_is_written_as_the_rules_write_it(
    reading_llm, alice, given, stored
):
    memory = rules_memory(alice, "Sarah is in charge of my team.", Memory.Type.SEMANTIC)
    reading_llm.queue(CHAT, about_answer(aspect=given))
    assert read_stored(memory.pk)
    memory.refresh_from_db()
    assert memory.about_aspect == stored


def test_the_owner_named_by_the_llm_is_the_owner(reading_llm, alice):
    alice.first_name = "Alice"
    alice.save()
    memory = rules_memory(alice, "Alice moved to Leeds in March.")
    reading_llm.queue(CHAT, about_answer("Alice", "person", "home"))
    assert read_stored(memory.pk)
    memory.refresh_from_db()
    assert (memory.about_subject, memory.about_kind, memory.about_aspect) == (
        "self",
        "self",
        "home",
    )


def test_an_about_the_owner_set_is_never_read_again(reading_llm, alice):
    memory = make_memory(
        alice,
        PHONE,
        Memory.Type.EPISODIC,
        about_subject="self",
        about_kind="self",
        about_aspect="hobby",
        about_set_by=SET_BY_OWNER,
    )
    assert read_stored(memory.pk) is False
    assert reading_llm.requests_to(CHAT) == []
    memory.refresh_from_db()
    assert memory.about_aspect == "hobby"


def test_a_redacted_memory_is_not_sent(reading_llm, alice):
    memory = rules_memory(alice)
    redact(memory, reason="Not to be kept.")
    assert read_stored(memory.pk) is False
    assert reading_llm.requests_to(CHAT) == []


def test_the_api_shows_the_llms_reading(reading_llm, alice, alice_api):
    reading_llm.queue(CHAT, about_answer(aspect="phone"))
    created = alice_api.create(PHONE, type="episodic")
    chain = alice_api.get(f"/v1/memories/{created['id']}/chain").json()
    [shown] = chain["memories"]
    assert shown["about"]["set_by"] == "llm"
    assert shown["about"]["aspect"] == "phone"


def test_the_detail_page_says_the_llm_read_it(reading_llm, alice, client):
    memory = rules_memory(alice)
    reading_llm.queue(CHAT, about_answer(aspect="phone"))
    read_stored(memory.pk)
    client.force_login(alice)
    page = client.get(f"/memories/{memory.pk}/").content.decode()
    assert "about you · phone" in page
    assert "(read by the LLM)" in page


def run_command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("derive_about", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_derive_about_llm_reads_the_rules_abouts_and_reports_failures(reading_llm, alice, bob):
    first = rules_memory(alice)
    second = rules_memory(alice, "Has a dentist appointment on 3 March 2027.")
    corrected = make_memory(
        alice, "Walks the dog at six.", about_kind="self", about_set_by=SET_BY_OWNER
    )
    bobs = rules_memory(bob)
    reading_llm.queue(
        CHAT,
        about_answer(aspect="phone"),
        Answer(status=400, json={"error": {"message": "quota"}}),
    )
    out, err = run_command("--llm", "--owner", "alice", "--concurrency", "1")
    assert "The LLM read what 1 of 2 memories are about." in out
    assert "1 failed and keep the rules' reading" in err and "quota" in err
    first.refresh_from_db()
    second.refresh_from_db()
    corrected.refresh_from_db()
    bobs.refresh_from_db()
    assert first.about_set_by == SET_BY_LLM
    assert second.about_set_by == SET_BY_RULES
    assert corrected.about_set_by == SET_BY_OWNER
    assert bobs.about_set_by == SET_BY_RULES
    assert len(reading_llm.requests_to(CHAT)) == 2


@pytest.mark.django_db(transaction=True)
def test_derive_about_llm_reads_several_at_once(reading_llm, alice):
    # Committed rows: the pool's threads read them on connections of their own.
    memories = [rules_memory(alice, f"{PHONE} Number {n}.") for n in range(6)]
    reading_llm.queue(CHAT, *[about_answer(aspect="phone") for _ in memories])
    out, err = run_command("--llm", "--concurrency", "3")
    assert "The LLM read what 6 of 6 memories are about." in out
    assert "failed" not in err
    assert {m.about_set_by for m in Memory.objects.filter(owner=alice)} == {SET_BY_LLM}


def test_derive_about_llm_dry_run_asks_nothing(reading_llm, alice):
    rules_memory(alice)
    out, _ = run_command("--llm", "--dry-run")
    assert "Would ask the LLM what 1 memories are about." in out
    assert reading_llm.requests_to(CHAT) == []


def test_derive_about_llm_without_an_llm_says_how_to_set_one(alice, settings):
    settings.LLM_BASE_URL = ""
    rules_memory(alice)
    with pytest.raises(CommandError, match="TIMOTHY_LLM_BASE_URL"):
        run_command("--llm")


EXTRACTION_TURNS = [Turn("user", "Sarah took over as head of my team in May 2026.", None)]


def extracted(content: str = NEW_MANAGER, **about) -> Answer:
    item = {"type": "episodic", "content": content, "entities": [], "confidence": 0.9, "turn": 0}
    if about:
        item["about"] = about
    return chat_answer({"facts": [item]})


def fact_schema(request) -> dict:
    return request.json["response_format"]["json_schema"]["schema"]["properties"]["facts"]["items"]


def test_extraction_asks_each_facts_about_in_the_same_call(
    reading_llm, alice, django_capture_on_commit_callbacks
):
    reading_llm.queue(CHAT, extracted(subject="self", kind="self", aspect="boss"))
    with django_capture_on_commit_callbacks(execute=True):
        [memory] = extract(alice, "s1", "turn_end", EXTRACTION_TURNS).written
    memory.refresh_from_db()
    assert (memory.about_subject, memory.about_aspect, memory.about_set_by) == (
        "self",
        "manager",
        SET_BY_LLM,
    )
    assert memory.about_occasion == "2026-05"
    # One call: the fact came with its about, so no second reading was asked for.
    [request] = reading_llm.requests_to(CHAT)
    assert "about" in fact_schema(request)["required"]
    assert "aspect:" in request.json["messages"][0]["content"]


def test_an_extracted_facts_unusable_about_leaves_the_fact_and_the_rules(reading_llm, alice):
    reading_llm.queue(CHAT, extracted(subject="Sarah", kind="boss-person", aspect="manager"))
    [memory] = extract(alice, "s1", "turn_end", EXTRACTION_TURNS).written
    memory.refresh_from_db()
    assert memory.content == NEW_MANAGER
    assert (memory.about_subject, memory.about_set_by) == ("Sarah", SET_BY_RULES)


def test_extraction_asks_no_about_when_the_llm_does_not_read_them(fake_llm, alice):
    fake_llm.queue(CHAT, extracted())
    [memory] = extract(alice, "s1", "turn_end", EXTRACTION_TURNS).written
    [request] = fake_llm.requests_to(CHAT)
    assert "about" not in fact_schema(request)["properties"]
    assert Memory.objects.get(pk=memory.pk).about_set_by == SET_BY_RULES
