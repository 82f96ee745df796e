from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories import consolidation
from memories.models import Memory, MemoryEvent
from tests.base import make_memory
from tests.consolidation.helpers import at_cosine, axis
from tests.fakes.openai_server import CHAT, Answer, chat_answer


@pytest.fixture
def planted(alice):
    now = timezone.now()
    weak = make_memory(
        alice,
        "Alice likes green tea.",
        confidence=0.7,
        entities=["tea"],
        last_confirmed_at=now - timedelta(days=10),
        embedding=axis(0),
    )
    strong = make_memory(
        alice,
        "Alice loves green tea.",
        Memory.Type.PREFERENCE,
        confidence=0.9,
        entities=["green tea"],
        last_confirmed_at=now - timedelta(days=20),
        embedding=at_cosine(0, 1, 0.97),
    )
    recent = make_memory(
        alice,
        "Alice drinks green tea daily.",
        confidence=0.8,
        entities=["Tea", "mornings"],
        last_confirmed_at=now - timedelta(days=5),
        embedding=at_cosine(0, 2, 0.96),
    )
    other = make_memory(alice, "Alice lives in Porto.", embedding=axis(3))
    return weak, strong, recent, other


def test_it_merges_a_planted_group_as_specified(planted, settings):
    settings.LLM_BASE_URL = ""
    weak, strong, recent, other = planted
    _, outcome = consolidation.consolidate()
    assert outcome.merged_groups == 1 and outcome.superseded == 3
    canonical = Memory.objects.get(source=Memory.Source.CONSOLIDATION)
    assert canonical.status == Memory.Status.ACTIVE
    # Without an LLM the strongest member (highest confidence) gives the text and type.
    assert canonical.content == "Alice loves green tea."
    assert canonical.type == Memory.Type.PREFERENCE
    assert canonical.confidence == 0.9
    assert canonical.last_confirmed_at == recent.last_confirmed_at
    assert sorted(canonical.entity_refs, key=str.lower) == ["green tea", "mornings", "tea"]
    assert list(canonical.embedding) == pytest.approx(at_cosine(0, 1, 0.97), abs=1e-6)
    for member in (weak, strong, recent):
        member.refresh_from_db()
        assert member.status == Memory.Status.SUPERSEDED
        assert member.superseded_by_id == canonical.pk
        [event] = member.events.filter(action=MemoryEvent.Action.SUPERSEDED)
        assert (event.via, event.reason) == ("consolidation", "consolidation")
        assert [m.pk for m in member.chain()] == [weak.pk, strong.pk, recent.pk, canonical.pk]
    [merged] = canonical.events.all()
    assert merged.action == MemoryEvent.Action.MERGED
    assert merged.reason == "consolidation"
    assert merged.data == {"supersedes": [weak.pk, strong.pk, recent.pk]}
    other.refresh_from_db()
    assert other.status == Memory.Status.ACTIVE


def test_it_breaks_a_confidence_tie_by_the_latest_confirmation(alice, settings):
    settings.LLM_BASE_URL = ""
    now = timezone.now()
    make_memory(
        alice,
        "Older wording.",
        confidence=0.8,
        embedding=axis(0),
        last_confirmed_at=now - timedelta(days=9),
    )
    make_memory(
        alice,
        "Newer wording.",
        confidence=0.8,
        embedding=axis(0),
        last_confirmed_at=now - timedelta(days=1),
    )
    consolidation.consolidate()
    assert Memory.objects.get(source=Memory.Source.CONSOLIDATION).content == "Newer wording."


def test_it_lets_the_llm_write_the_canonical_text(planted, fake_llm):
    fake_llm.queue(CHAT, chat_answer({"content": "Alice  drinks green tea every day."}))
    consolidation.consolidate()
    canonical = Memory.objects.get(source=Memory.Source.CONSOLIDATION)
    assert canonical.content == "Alice drinks green tea every day."
    assert canonical.embedding is None  # new text: embedded in the background
    [request] = fake_llm.requests_to(CHAT)
    statements = request.json["messages"][1]["content"]
    for text in (
        "Alice likes green tea.",
        "Alice loves green tea.",
        "Alice drinks green tea daily.",
    ):
        assert text in statements
    assert "Porto" not in statements


@pytest.mark.parametrize(
    "reply",
    [chat_answer("not json at all"), chat_answer({"content": "  "}), Answer(status=400, body="{}")],
    ids=["garbage", "empty", "400"],
)
def test_it_falls_back_to_the_strongest_text_when_the_llm_fails(planted, fake_llm, reply):
    fake_llm.queue(CHAT, reply)
    _, outcome = consolidation.consolidate()
    assert outcome.merged_groups == 1
    assert (
        Memory.objects.get(source=Memory.Source.CONSOLIDATION).content == "Alice loves green tea."
    )


def test_it_falls_back_to_the_strongest_text_when_the_llm_writes_too_much(
    planted, fake_llm, settings
):
    settings.MAX_CONTENT_CHARS = 30
    fake_llm.queue(CHAT, chat_answer({"content": "Alice drinks green tea, every single day."}))
    _, outcome = consolidation.consolidate()
    assert outcome.merged_groups == 1
    assert (
        Memory.objects.get(source=Memory.Source.CONSOLIDATION).content == "Alice loves green tea."
    )


def test_it_never_merges_across_owners(alice, bob, settings):
    settings.LLM_BASE_URL = ""
    make_memory(alice, "Likes tea.", embedding=axis(0))
    make_memory(bob, "Likes tea.", embedding=axis(0))
    make_memory(bob, "Likes tea!", embedding=axis(0))
    _, outcome = consolidation.consolidate()
    assert outcome.merged_groups == 1
    canonical = Memory.objects.get(source=Memory.Source.CONSOLIDATION)
    assert canonical.owner == bob
    assert Memory.objects.get(owner=alice).status == Memory.Status.ACTIVE


def test_it_consolidates_only_the_given_owner(alice, bob, settings):
    settings.LLM_BASE_URL = ""
    for owner in (alice, bob):
        make_memory(owner, "Likes tea.", embedding=axis(0))
        make_memory(owner, "Likes tea!", embedding=axis(0))
    consolidation.consolidate(alice)
    assert Memory.objects.filter(source=Memory.Source.CONSOLIDATION).get().owner == alice
    assert Memory.objects.for_owner(bob).active().count() == 2


@pytest.mark.parametrize("batch, first_merged", [(1, True), (50, False)])
def test_it_leaves_every_group_merged_or_untouched_after_a_crash(
    alice, settings, monkeypatch, batch, first_merged
):
    settings.LLM_BASE_URL = ""
    monkeypatch.setattr(consolidation, "MERGE_BATCH", batch)
    first = [make_memory(alice, f"Drinks tea ({i}).", embedding=axis(0)) for i in range(2)]
    second = [make_memory(alice, f"Lives in Porto ({i}).", embedding=axis(1)) for i in range(3)]
    original_log = Memory.log
    merges = []

    def crash_on_second_merge(self, action, **kwargs):
        if action == MemoryEvent.Action.MERGED:
            merges.append(self.pk)
            if len(merges) == 2:
                raise RuntimeError("power cut")
        return original_log(self, action, **kwargs)

    monkeypatch.setattr(Memory, "log", crash_on_second_merge)
    with pytest.raises(RuntimeError, match="power cut"):
        consolidation.consolidate()
    for member in first:
        member.refresh_from_db()
        assert (member.status == Memory.Status.SUPERSEDED) is first_merged
    for member in second:
        member.refresh_from_db()
        assert member.status == Memory.Status.ACTIVE
        assert member.superseded_by_id is None
        assert not member.events.exists()
    canonical = Memory.objects.filter(source=Memory.Source.CONSOLIDATION)
    assert canonical.count() == (1 if first_merged else 0)
    monkeypatch.setattr(Memory, "log", original_log)
    _, outcome = consolidation.consolidate()
    assert outcome.merged_groups == (1 if first_merged else 2)
    assert Memory.objects.for_owner(alice).active().count() == 2


def test_it_skips_a_group_that_changed_after_planning(planted, settings):
    settings.LLM_BASE_URL = ""
    weak, *_ = planted
    plan = consolidation.plan()
    weak.archive(reason="owner archived it meanwhile")
    outcome = consolidation.apply(plan)
    assert outcome.skipped == 1 and outcome.merged_groups == 0
    assert not Memory.objects.filter(source=Memory.Source.CONSOLIDATION).exists()
