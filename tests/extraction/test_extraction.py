from __future__ import annotations

import json
import math

import pytest

from memories import llm
from memories.extraction import Turn, extract
from memories.models import Memory, MemoryEvent
from memories.tasks import extract_conversation
from tests.base import make_memory
from tests.fakes.openai_server import CHAT, Answer, chat_answer

TURNS = [
    Turn("system", "You are Timothy. SECRET-SYSTEM-PROMPT", None),
    Turn(
        "user",
        "I'm flying to Tokyo next week, I always take an aisle seat.",
        "2026-11-29T10:00:00Z",
    ),
    Turn("assistant", "Noted! You seem to love sushi too.", "2026-11-29T10:00:05Z"),
    Turn("user", "My sister Maria lives in Lisbon.", "2026-11-29T10:01:00Z"),
]


def fact(content: str, turn: int, type: str = "semantic", confidence: float = 0.8, **extra):
    return {
        "type": type,
        "content": content,
        "entities": extra.get("entities", []),
        "confidence": confidence,
        "turn": turn,
    }


def answer(*facts) -> Answer:
    return chat_answer({"facts": list(facts)})


def test_it_proposes_facts_from_user_turns_with_provenance(fake_llm, alice):
    fake_llm.queue(
        CHAT,
        answer(
            fact("The owner prefers aisle seats.", 1, "preference", 0.9),
            fact("The owner's sister Maria lives in Lisbon.", 3, entities=["Maria", "Lisbon"]),
        ),
    )
    written = extract(alice, "session-1", "turn_end", TURNS).written
    assert [m.content for m in written] == [
        "The owner prefers aisle seats.",
        "The owner's sister Maria lives in Lisbon.",
    ]
    sister = Memory.objects.get(pk=written[1].pk)
    assert sister.status == Memory.Status.PROPOSED
    assert sister.source == Memory.Source.EXTRACTION
    assert sister.session_id == "session-1"
    assert sister.entity_refs == ["Maria", "Lisbon"]
    assert sister.metadata == {"phase": "turn_end", "turn": 3, "turn_at": "2026-11-29T10:01:00Z"}
    [event] = sister.events.all()
    assert event.action == MemoryEvent.Action.PROPOSED
    assert event.via == "extraction"
    assert Memory.objects.get(pk=written[0].pk).type == Memory.Type.PREFERENCE


def test_it_never_takes_a_fact_from_an_assistant_turn(fake_llm, alice):
    fake_llm.queue(
        CHAT,
        answer(
            fact("The owner loves sushi.", 2, "preference"),
            fact("The owner is Timothy.", 0),
            fact("The owner's sister Maria lives in Lisbon.", 3),
            fact("The owner owns a boat.", 99),
        ),
    )
    written = extract(alice, "s", "turn_end", TURNS).written
    assert [m.content for m in written] == ["The owner's sister Maria lives in Lisbon."]


def test_it_never_sends_system_text_to_the_model(fake_llm, alice):
    fake_llm.queue(CHAT, answer())
    extract(alice, "s", "pre_compaction", TURNS)
    [request] = fake_llm.requests_to(CHAT)
    conversation = request.json["messages"][1]["content"]
    assert "SECRET-SYSTEM-PROMPT" not in json.dumps(request.json)
    assert "[turn 1] user:" in conversation
    assert "[turn 2] assistant:" in conversation


def test_it_asks_nothing_when_the_user_said_nothing(fake_llm, alice):
    assert (
        extract(alice, "s", "turn_end", [Turn("assistant", "Hello!"), Turn("user", "  ")]).written
        == []
    )
    assert fake_llm.requests == []


def test_it_does_not_propose_what_the_owner_already_holds(fake_llm, alice, bob):
    make_memory(alice, "The owner prefers aisle seats.")
    make_memory(alice, "The owner drinks coffee", status=Memory.Status.PROPOSED)
    make_memory(alice, "The owner hates Mondays.", status=Memory.Status.REJECTED)
    make_memory(bob, "The owner's sister Maria lives in Lisbon.")
    fake_llm.queue(
        CHAT,
        answer(
            fact("the owner  prefers AISLE seats", 1),
            fact("The owner drinks coffee.", 1),
            fact("The owner hates Mondays!", 1),
            fact("The owner's sister Maria lives in Lisbon.", 3),
            fact("The owner's sister Maria lives in Lisbon", 3),
        ),
    )
    result = extract(alice, "s", "turn_end", TURNS)
    assert [m.content for m in result.written] == ["The owner's sister Maria lives in Lisbon."]
    assert [(s.content, s.why) for s in result.skipped] == [
        ("the owner prefers AISLE seats", "same text"),
        ("The owner drinks coffee.", "same text"),
        ("The owner hates Mondays!", "same text"),
    ]


def unit(angle: float) -> list[float]:
    """A 384-d unit vector at ``angle`` radians from the first axis, in the first plane."""
    return [math.cos(angle), math.sin(angle)] + [0.0] * 382


def test_it_does_not_propose_a_duplicate_of_an_active_memory(fake_llm, openai_embeddings, alice):
    maria = make_memory(alice, "Alice's sister is called Maria.", embedding=unit(0.0))
    make_memory(alice, "Alice once lived in Rome.", embedding=unit(math.pi / 2))
    fake_llm.vectors["The owner has a sister named Maria."] = unit(math.acos(0.96))
    # Close to the Rome memory, but below the duplicate threshold: an update at
    # most; and, like a real embedding of it, nowhere near the sister's.
    rome_then = [0.0, 0.70, math.sqrt(1 - 0.70**2)] + [0.0] * 381
    fake_llm.vectors["The owner spent a year in Rome."] = rome_then
    fake_llm.queue(
        CHAT,
        answer(
            fact("The owner has a sister named Maria.", 3, entities=["Maria"]),
            fact("The owner spent a year in Rome.", 3),
        ),
    )
    result = extract(alice, "s", "turn_end", TURNS)
    assert [m.content for m in result.written] == ["The owner spent a year in Rome."]
    assert list(Memory.objects.get(pk=result.written[0].pk).embedding) == pytest.approx(
        rome_then, abs=1e-6
    )
    [skipped] = result.skipped
    assert (skipped.content, skipped.duplicate_of) == (
        "The owner has a sister named Maria.",
        maria.pk,
    )
    assert skipped.why == "duplicate (score 0.96)"


def test_it_does_not_propose_again_what_waits_in_the_queue(fake_llm, alice, caplog):
    waiting = Memory.propose(alice, "His best friend is Jonas.", Memory.Type.SEMANTIC)
    fake_llm.queue(CHAT, answer(fact("Jonas is his best friend.", 3, entities=["Jonas"])))

    with caplog.at_level("INFO", logger="memories.extraction"):
        result = extract(alice, "s", "turn_end", TURNS)

    assert result.written == []
    assert [s.duplicate_of for s in result.skipped] == [waiting.pk]
    assert "Extraction skipped a fact already held" in caplog.text
    assert Memory.objects.for_owner(alice).count() == 1


def test_it_still_proposes_an_update_of_an_active_memory(fake_llm, alice):
    make_memory(alice, "The owner prefers aisle seats on long flights.")
    fake_llm.queue(CHAT, answer(fact("The owner prefers window seats on long flights.", 1)))
    result = extract(alice, "s", "turn_end", TURNS)
    assert [m.content for m in result.written] == [
        "The owner prefers window seats on long flights."
    ]
    assert result.skipped == []


def test_it_keeps_the_good_facts_of_a_partly_garbled_answer(fake_llm, alice):
    fake_llm.queue(
        CHAT,
        answer(
            {"type": "gossip", "content": "x", "entities": [], "confidence": 1, "turn": 1},
            {"content": "The owner likes jazz.", "turn": 1},
            "just a string",
            fact("   ", 1),
            fact("The owner flies to Tokyo next week.", 1, "episodic", confidence=7),
        ),
    )
    [memory] = extract(alice, "s", "turn_end", TURNS).written
    assert memory.content == "The owner flies to Tokyo next week."
    assert memory.confidence == 1.0


@pytest.mark.parametrize(
    "reply",
    [
        chat_answer('{"facts": [{"type": "semantic", "content": "The owner'),
        chat_answer({"facts": "none"}),
        chat_answer({"memories": []}),
        chat_answer(None, refusal="No."),
        Answer(status=400, json={"error": {"message": "invalid schema"}}),
        Answer(json={"facts": []}, delay=5.0),
    ],
    ids=["truncated-json", "facts-not-a-list", "wrong-key", "refusal", "400", "slow"],
)
def test_it_writes_nothing_when_the_model_answers_garbage(fake_llm, settings, alice, reply):
    settings.LLM_TIMEOUT = 0.5
    fake_llm.queue(CHAT, reply)
    turns = [{"role": t.role, "content": t.content, "at": t.at} for t in TURNS]
    assert extract_conversation(alice.pk, "s", "turn_end", turns) == 0
    assert Memory.objects.count() == 0
    assert MemoryEvent.objects.count() == 0


def test_it_writes_all_facts_or_none(fake_llm, alice, monkeypatch):
    fake_llm.queue(
        CHAT,
        answer(fact("The owner prefers aisle seats.", 1), fact("The owner has a sister.", 3)),
    )
    original = Memory.propose.__func__
    calls = []

    def failing_second(cls, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(Memory, "propose", classmethod(failing_second))
    with pytest.raises(RuntimeError):
        extract(alice, "s", "turn_end", TURNS)
    assert Memory.objects.count() == 0


def test_it_auto_promotes_only_confident_facts_and_preferences(fake_llm, settings, alice):
    settings.AUTO_PROMOTE_MIN_CONFIDENCE = "0.9"
    fake_llm.queue(
        CHAT,
        answer(
            fact("The owner prefers aisle seats.", 1, "preference", 0.95),
            fact("The owner flies to Tokyo next week.", 1, "episodic", 0.99),
            fact("The owner's sister Maria lives in Lisbon.", 3, "semantic", 0.6),
        ),
    )
    written = extract(alice, "s", "turn_end", TURNS).written
    statuses = {m.content: Memory.objects.get(pk=m.pk).status for m in written}
    assert statuses == {
        "The owner prefers aisle seats.": Memory.Status.ACTIVE,
        "The owner flies to Tokyo next week.": Memory.Status.PROPOSED,
        "The owner's sister Maria lives in Lisbon.": Memory.Status.PROPOSED,
    }
    promoted = Memory.objects.get(content="The owner prefers aisle seats.")
    assert promoted.last_confirmed_at is not None
    assert [e.action for e in promoted.events.all()] == ["proposed", "confirmed"]


def test_it_promotes_nothing_by_default(fake_llm, settings, alice):
    settings.AUTO_PROMOTE_MIN_CONFIDENCE = ""
    fake_llm.queue(CHAT, answer(fact("The owner prefers aisle seats.", 1, "preference", 1.0)))
    [memory] = extract(alice, "s", "turn_end", TURNS).written
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.PROPOSED


def test_it_reports_a_missing_llm(settings, alice):
    settings.LLM_BASE_URL = ""
    with pytest.raises(llm.LLMNotConfigured):
        extract(alice, "s", "turn_end", TURNS)
