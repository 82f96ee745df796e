from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import ApiToken, Memory
from tests.base import make_memory
from tests.pages.conftest import flashes


@pytest.mark.django_db
def test_it_shows_the_chain_oldest_first_with_the_head_marked(alice_client, alice):
    first = make_memory(alice, "Alice lives in Porto.")
    second = first.supersede("Alice lives in Lisbon.", actor=alice)
    third = second.supersede("Alice lives in central Lisbon.", actor=alice)

    response = alice_client.get(reverse("memory-detail", args=[first.pk]))

    assert response.status_code == 200
    versions = response.context["versions"]
    assert [v.memory.pk for v in versions] == [first.pk, second.pk, third.pk]
    assert [v.is_head for v in versions] == [False, False, True]
    assert [v.is_current for v in versions] == [True, False, False]
    body = response.content.decode()
    assert "<del>Porto</del><ins>Lisbon</ins>" in body
    assert "<ins>central </ins>" in body
    assert f'The current version is <a href="{reverse("memory-detail", args=[third.pk])}"' in body


@pytest.mark.django_db
def test_it_shows_a_merge_as_several_rows_flowing_into_one(alice_client, alice):
    tea = make_memory(alice, "Alice likes green tea.")
    more_tea = make_memory(alice, "Alice drinks green tea every morning.")
    merged = Memory.merge([tea, more_tea], "Alice drinks green tea every morning.", actor=alice)

    response = alice_client.get(reverse("memory-detail", args=[merged.pk]))

    head = response.context["versions"][-1]
    assert head.is_merge
    assert {source.pk for source in head.sources} == {tea.pk, more_tea.pk}
    body = response.content.decode()
    assert "Merged from 2 memories" in body
    assert body.count('class="merge-source"') == 2
    assert "Merged" in body  # the event log entry


@pytest.mark.django_db
def test_it_shows_the_event_log_of_the_whole_chain(alice_client, alice):
    proposal = Memory.propose(alice, "Alice has two cats.", "semantic")
    new = proposal.supersede("Alice has three cats.", actor=alice, via="page", reason="one more")

    response = alice_client.get(reverse("memory-detail", args=[new.pk]))

    events = list(response.context["events"])
    assert [e.action for e in events] == ["proposed", "superseded", "version"]
    assert b"one more" in response.content


@pytest.mark.django_db
def test_it_hides_another_owners_memory(alice_client, bob):
    theirs = make_memory(bob, "Bob's secret.")
    assert alice_client.get(reverse("memory-detail", args=[theirs.pk])).status_code == 404
    assert alice_client.get(reverse("memory-detail", args=[999999])).status_code == 404


@pytest.mark.django_db
def test_it_offers_the_actions_that_fit_the_status(alice_client, alice):
    active = make_memory(alice)
    proposal = Memory.propose(alice, "Maybe.", "semantic")
    rejected = make_memory(alice, status="rejected")

    def buttons(memory) -> str:
        return alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()

    assert "Re-confirm" in buttons(active) and "Archive…" in buttons(active)
    assert "Edit (new version)" in buttons(active)
    assert "Reject" in buttons(proposal) and "Edit, then confirm" in buttons(proposal)
    assert "Re-confirm" not in buttons(proposal)
    assert "You rejected this proposal" in buttons(rejected)
    assert "Archive…" not in buttons(rejected)


@pytest.mark.django_db
def test_it_rejects_post_on_the_detail(alice_client, alice):
    memory = make_memory(alice)
    assert alice_client.post(reverse("memory-detail", args=[memory.pk])).status_code == 405


# --- reconfirm -------------------------------------------------------------------


@pytest.mark.django_db
def test_it_reconfirms(alice_client, alice):
    before = timezone.now() - timedelta(days=40)
    memory = make_memory(alice, created_at=before)
    response = alice_client.post(reverse("memory-reconfirm", args=[memory.pk]), follow=True)
    memory.refresh_from_db()
    assert memory.last_confirmed_at > before
    assert memory.events.last().action == "reconfirmed"
    assert flashes(response)[0].startswith("Re-confirmed")


@pytest.mark.django_db
def test_it_does_not_reconfirm_a_proposal(alice_client, alice):
    memory = Memory.propose(alice, "Maybe.", "semantic")
    response = alice_client.post(reverse("memory-reconfirm", args=[memory.pk]), follow=True)
    assert flashes(response) == [f"Cannot reconfirm memory {memory.pk}: it is proposed."]


@pytest.mark.django_db
def test_it_guards_reconfirm(alice_client, alice, bob):
    mine, theirs = make_memory(alice), make_memory(bob)
    assert alice_client.get(reverse("memory-reconfirm", args=[mine.pk])).status_code == 405
    assert alice_client.post(reverse("memory-reconfirm", args=[theirs.pk])).status_code == 404
    assert not theirs.events.exists()


# --- archive -----------------------------------------------------------------------


@pytest.mark.django_db
def test_it_asks_before_archiving(alice_client, alice):
    memory = make_memory(alice, "Alice works at Acme.")
    page = alice_client.get(reverse("memory-archive", args=[memory.pk]))
    assert page.status_code == 200
    assert b"Archive this memory?" in page.content
    unconfirmed = alice_client.post(reverse("memory-archive", args=[memory.pk]))
    assert unconfirmed.status_code == 200
    assert b"Archive this memory?" in unconfirmed.content
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE


@pytest.mark.django_db
def test_it_archives_once_confirmed(alice_client, alice):
    memory = make_memory(alice, "Alice works at Acme.")
    response = alice_client.post(
        reverse("memory-archive", args=[memory.pk]),
        {"confirmed": "yes", "reason": "changed jobs"},
        follow=True,
    )
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ARCHIVED
    event = memory.events.last()
    assert (event.action, event.reason, event.via) == ("archived", "changed jobs", "page")
    assert flashes(response)[0].startswith("Archived “Alice works at Acme.”")
    assert response.redirect_chain[-1][0] == reverse("memory-detail", args=[memory.pk])


@pytest.mark.django_db
def test_it_does_not_archive_a_proposal(alice_client, alice):
    memory = Memory.propose(alice, "Maybe.", "semantic")
    response = alice_client.post(
        reverse("memory-archive", args=[memory.pk]), {"confirmed": "yes"}, follow=True
    )
    assert flashes(response) == [f"Cannot archive memory {memory.pk}: it is proposed."]


@pytest.mark.django_db
def test_it_guards_archive(alice_client, bob):
    theirs = make_memory(bob)
    url = reverse("memory-archive", args=[theirs.pk])
    assert alice_client.get(url).status_code == 404
    assert alice_client.post(url, {"confirmed": "yes"}).status_code == 404
    assert alice_client.put(url).status_code == 405
    theirs.refresh_from_db()
    assert theirs.status == Memory.Status.ACTIVE


# --- edit ----------------------------------------------------------------------------


def edit(client, memory, **data):
    payload = {
        "content": memory.content,
        "type": memory.type,
        "entities": ", ".join(memory.entity_refs),
    }
    payload.update(data)
    return client.post(reverse("memory-edit", args=[memory.pk]), payload, follow=True)


@pytest.mark.django_db
def test_it_prefills_the_edit_form(alice_client, alice):
    memory = make_memory(alice, "Alice likes jazz.", entities=["Alice", "Jazz"])
    response = alice_client.get(reverse("memory-edit", args=[memory.pk]))
    form = response.context["form"]
    assert form.initial == {
        "content": "Alice likes jazz.",
        "type": "semantic",
        "entities": "Alice, Jazz",
        "about_subject": "Alice",
        "about_kind": "person",
        "about_aspect": "music",
        "about_occasion": "",
        "replaces": None,
    }
    assert b"Save new version" in response.content


@pytest.mark.django_db
def test_it_writes_a_new_version_of_an_active_memory(alice_client, alice):
    memory = make_memory(alice, "Alice likes jazz.", entities=["Alice"])
    response = edit(
        alice_client,
        memory,
        content="Alice loves jazz.",
        type="preference",
        entities="Alice, Jazz ,",
        reason="stronger",
    )
    memory.refresh_from_db()
    new = memory.superseded_by
    assert memory.status == Memory.Status.SUPERSEDED
    assert (new.content, new.type, new.entity_refs, new.status) == (
        "Alice loves jazz.",
        "preference",
        ["Alice", "Jazz"],
        "active",
    )
    assert new.events.last().reason == "stronger"
    assert response.redirect_chain[-1][0] == reverse("memory-detail", args=[new.pk])
    assert flashes(response) == ["Saved a new version “Alice loves jazz.”"]


@pytest.mark.django_db
def test_it_edits_then_confirms_a_proposal(alice_client, alice):
    proposal = Memory.propose(alice, "Alice prefers aisle seats.", "preference")
    response = edit(alice_client, proposal, content="Alice prefers window seats.")
    proposal.refresh_from_db()
    assert proposal.status == Memory.Status.SUPERSEDED
    assert proposal.superseded_by.status == Memory.Status.ACTIVE
    assert proposal.superseded_by.content == "Alice prefers window seats."
    assert flashes(response) == ["Confirmed your edited version “Alice prefers window seats.”"]
    assert b"<del>aisle</del><ins>window</ins>" in response.content


@pytest.mark.django_db
def test_it_confirms_an_unchanged_proposal(alice_client, alice):
    proposal = Memory.propose(alice, "Alice prefers aisle seats.", "preference")
    edit(alice_client, proposal)
    proposal.refresh_from_db()
    assert proposal.status == Memory.Status.ACTIVE
    assert proposal.superseded_by is None


@pytest.mark.django_db
def test_it_writes_no_version_when_nothing_changed(alice_client, alice):
    memory = make_memory(alice, "Alice likes jazz.")
    response = edit(alice_client, memory)
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 1
    assert flashes(response) == ["Nothing changed, so no new version was written."]


@pytest.mark.django_db
def test_it_shows_edit_errors(alice_client, alice):
    memory = make_memory(alice, "Alice likes jazz.")
    response = edit(alice_client, memory, content="   ", type="nonsense")
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"content", "type"}
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_it_edits_only_the_current_version(alice_client, alice):
    memory = make_memory(alice, "Alice likes jazz.")
    new = memory.supersede("Alice loves jazz.")
    response = alice_client.get(reverse("memory-edit", args=[memory.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("memory-detail", args=[memory.pk])
    assert "only the current version is edited" in flashes(response)[0]
    response = edit(alice_client, memory, content="Something else.")
    assert Memory.objects.get(pk=new.pk).status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 2


@pytest.mark.django_db
def test_it_guards_edit(alice_client, bob):
    theirs = make_memory(bob, "Bob's.")
    url = reverse("memory-edit", args=[theirs.pk])
    assert alice_client.get(url).status_code == 404
    assert alice_client.post(url, {"content": "Mine now", "type": "semantic"}).status_code == 404
    assert alice_client.delete(url).status_code == 405
    theirs.refresh_from_db()
    assert theirs.status == Memory.Status.ACTIVE


LONG = "Grandma's recipe for bolo de arroz. " + "Mix the flour, sugar and eggs well. " * 80


@pytest.mark.django_db
def test_it_titles_a_long_memory_and_shows_the_full_text_below(alice_client, alice):
    memory = make_memory(alice, LONG.strip())
    body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    assert (
        '<h1 class="memory-content memory-title" dir="auto">'
        "Grandma&#x27;s recipe for bolo de arroz.</h1>"
    ) in body
    assert '<details class="full-text" open>' in body
    assert f'Full text <span class="muted">({len(LONG.strip())} characters)</span>' in body
    assert body.count("Mix the flour, sugar and eggs well.") == 2 * 80  # full text + version


@pytest.mark.django_db
def test_it_keeps_a_short_memory_as_its_own_title(alice_client, alice):
    memory = make_memory(alice, "اسم زوجته ليلى.")
    body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    assert '<h1 class="memory-content" dir="auto">اسم زوجته ليلى.</h1>' in body
    assert "full-text" not in body
    assert '<p class="version-content" dir="auto">اسم زوجته ليلى.</p>' in body


@pytest.mark.django_db
def test_it_names_the_token_that_created_the_memory(alice_client, alice, alice_token_memory):
    memory, token = alice_token_memory
    body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    assert "Proposed through the API" in body
    assert f"“<bdi>laptop assistant</bdi>” <code>{token.prefix}…</code>" in body
    assert "Revoked since" not in body
    assert '<code dir="auto">chat-7</code>' in body
    token.revoke()
    body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    assert "Revoked since" in body


@pytest.mark.django_db
def test_it_says_what_is_known_of_older_memories(alice_client, alice):
    older = Memory.propose(alice, "Alice has a bike.", "semantic", via="api")
    mine = Memory.remember(alice, "Alice has a car.", "semantic", actor=alice, via="page")
    body = alice_client.get(reverse("memory-detail", args=[older.pk])).content.decode()
    assert "Proposed through the API" in body
    assert "Not recorded (added before tokens were recorded)" in body
    body = alice_client.get(reverse("memory-detail", args=[mine.pk])).content.decode()
    assert "Added on these pages" in body
    assert "data-provenance-token" not in body


@pytest.mark.django_db
def test_it_names_channels_and_types_in_the_pages_vocabulary(alice_client, alice):
    memory = Memory.propose(alice, "Alice ran a marathon.", "episodic", via="api")
    body = alice_client.get(reverse("memory-detail", args=[memory.pk])).content.decode()
    assert '<td data-label="Through">API</td>' in body
    assert "<dd>Event (episodic)</dd>" in body


@pytest.fixture
def alice_token_memory(alice):
    token, _ = ApiToken.issue(alice, "laptop assistant")
    memory = Memory.propose(
        alice,
        "Alice is training for a marathon.",
        "episodic",
        session_id="chat-7",
        metadata={"api_token": {"id": token.pk, "name": token.name, "prefix": token.prefix}},
        via="api",
    )
    return memory, token


@pytest.mark.django_db
def test_it_shows_when_recall_last_packed_it(alice_client, alice):
    stamped_at = timezone.now() - timedelta(hours=3)
    recalled = make_memory(alice, "Alice rows on Sundays.", last_retrieved_at=stamped_at)
    never = make_memory(alice, "Alice keeps bees.")
    body = alice_client.get(reverse("memory-detail", args=[recalled.pk])).content.decode()
    assert (
        f'<dt>Last recalled</dt><dd><span class="when"><time datetime="{stamped_at.isoformat()}"'
        in body
    )
    body = alice_client.get(reverse("memory-detail", args=[never.pk])).content.decode()
    assert '<dt>Last recalled</dt><dd><span class="muted">never</span>' in body
