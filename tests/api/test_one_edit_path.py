"""The API's supersede and the pages' edit are one path (Memory.edit): the same
versions and events for the same edit, and one rule for an edit that changes
nothing. What differs is the documented part: the owner's edit on the pages
carries confidence 1.0 and source page (its confirmed event keeping what was
proposed); the API's keeps the memory's confidence and source unless given."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import Memory

PROPOSED = dict(
    content="Likes black tea.",
    type=Memory.Type.PREFERENCE,
    entities=["tea"],
    confidence=0.7,
    source=Memory.Source.EXTRACTION,
)


@pytest.fixture
def page(client, alice):
    client.force_login(alice)
    return client


def two_memories(alice, status: str) -> tuple[Memory, Memory]:
    """The same memory twice: one edited through the API, one on the pages."""
    made = []
    for _ in range(2):
        if status == Memory.Status.PROPOSED:
            made.append(Memory.propose(alice, **PROPOSED))
        else:
            fields = {k: v for k, v in PROPOSED.items() if k not in ("confidence", "source")}
            made.append(Memory.remember(alice, **fields))
    return made[0], made[1]


def edit_by_api(api, memory: Memory, content: str) -> int:
    response = api.post(
        f"/v1/memories/{memory.pk}",
        {"action": "supersede", "content": content, "type": memory.type, "entities": ["tea"]},
    )
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def edit_on_page(page, memory: Memory, content: str) -> int:
    response = page.post(
        reverse("memory-edit", args=[memory.pk]),
        {"content": content, "type": memory.type, "entities": "tea", "reason": ""},
    )
    assert response.status_code == 302
    memory.refresh_from_db()
    return memory.head_id()


def shape(start: Memory) -> list[dict]:
    """Every version of the chain and its events, without ids, moments, or the
    confidence and source the two surfaces deliberately differ in."""
    ids = {m.pk: n for n, m in enumerate(Memory.objects.chain(start))}
    shared = ("from", "edited", "successor", "supersedes", "replaces")

    def plain(value):
        if isinstance(value, int) and value in ids:
            return f"#{ids[value]}"
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return [
        {
            "status": version.status,
            "content": version.content,
            "entities": version.entity_refs,
            "events": [
                (event.action, {k: plain(v) for k, v in event.data.items() if k in shared})
                for event in version.events.order_by("id")
            ],
        }
        for version in Memory.objects.chain(start)
    ]


@pytest.mark.parametrize(
    "status, content",
    [
        (Memory.Status.PROPOSED, "Likes green tea."),
        (Memory.Status.PROPOSED, PROPOSED["content"]),
        (Memory.Status.ACTIVE, "Likes green tea."),
        (Memory.Status.ACTIVE, PROPOSED["content"]),
    ],
    ids=["proposal-edited", "proposal-unchanged", "active-edited", "active-unchanged"],
)
def test_the_api_and_the_page_write_the_same_versions_and_events(
    alice_api, page, alice, status, content
):
    by_api, on_page = two_memories(alice, status)
    api_head = Memory.objects.get(pk=edit_by_api(alice_api, by_api, content))
    page_head = Memory.objects.get(pk=edit_on_page(page, on_page, content))

    assert shape(by_api) == shape(on_page)
    changed = content != PROPOSED["content"]
    assert (api_head.pk != by_api.pk) == (page_head.pk != on_page.pk) == changed
    if status == Memory.Status.ACTIVE and not changed:
        assert not by_api.events.exclude(action="created").exists()
        assert not on_page.events.exclude(action="created").exists()
        assert page_head.source == api_head.source == Memory.Source.REMEMBER
        return
    # The surfaces' own, on purpose: the owner's on the pages, the memory's through the API.
    assert (page_head.confidence, page_head.source) == (1.0, Memory.Source.PAGE)
    if status == Memory.Status.PROPOSED:
        assert (api_head.confidence, api_head.source) == (0.7, Memory.Source.EXTRACTION)
        confirmed = page_head.events.get(action="confirmed").data
        assert (confirmed["proposed_confidence"], confirmed["proposed_source"]) == (
            0.7,
            Memory.Source.EXTRACTION,
        )
        assert "proposed_confidence" not in api_head.events.get(action="confirmed").data
    else:
        assert (api_head.confidence, api_head.source) == (1.0, Memory.Source.REMEMBER)


def test_an_edited_proposal_is_confirmed_on_the_record_through_either(alice_api, page, alice):
    by_api, on_page = two_memories(alice, Memory.Status.PROPOSED)
    api_head = Memory.objects.get(pk=edit_by_api(alice_api, by_api, "Likes green tea."))
    page_head = Memory.objects.get(pk=edit_on_page(page, on_page, "Likes green tea."))
    for head, proposal in ((api_head, by_api), (page_head, on_page)):
        assert [e.action for e in head.events.order_by("id")] == ["version", "confirmed"]
        confirmed = head.events.get(action="confirmed").data
        assert (confirmed["from"], confirmed["edited"]) == ("proposed", proposal.pk)


def test_the_api_takes_the_confidence_it_is_given(alice_api, alice):
    proposal = Memory.propose(alice, **PROPOSED)
    response = alice_api.post(
        f"/v1/memories/{proposal.pk}",
        {"action": "supersede", "content": "Likes green tea.", "confidence": 0.9},
    )
    assert response.status_code == 201, response.text
    assert (response.json()["confidence"], response.json()["source"]) == (0.9, "extraction")
