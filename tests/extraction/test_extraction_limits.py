"""Extraction keeps to the model's limits: a fact over them is shaped, not lost."""

from __future__ import annotations

from memories.extraction import Turn, extract
from memories.models import MAX_ENTITIES, MAX_ENTITY_CHARS
from tests.fakes.openai_server import CHAT, chat_answer

TURNS = [Turn("user", "I met a lot of people at the conference.", "2026-11-29T10:00:00Z")]


def test_it_keeps_a_fact_with_too_many_or_too_long_entities_within_the_limits(fake_llm, alice):
    names = [f"Person {n}" for n in range(MAX_ENTITIES + 10)]
    long_name = "y" * (MAX_ENTITY_CHARS + 1)
    fact = {
        "type": "episodic",
        "content": "The owner met many people at the conference.",
        "entities": [long_name, *names],
        "confidence": 0.8,
        "turn": 0,
    }
    fake_llm.queue(CHAT, chat_answer({"facts": [fact]}))
    [memory] = extract(alice, "s", "turn_end", TURNS).written
    assert memory.entity_refs == names[:MAX_ENTITIES]


def test_it_drops_a_fact_over_the_content_limit(fake_llm, settings, alice):
    settings.MAX_CONTENT_CHARS = 30
    facts = [
        {"type": "semantic", "content": "x" * 31, "entities": [], "confidence": 0.8, "turn": 0},
        {"type": "semantic", "content": "Went to a conference.", "confidence": 0.8, "turn": 0},
    ]
    fake_llm.queue(CHAT, chat_answer({"facts": facts}))
    assert [m.content for m in extract(alice, "s", "turn_end", TURNS).written] == [
        "Went to a conference."
    ]
