from datetime import datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import ApiToken, Memory
from tests.base import make_memory


def listed(client, **params) -> list[int]:
    response = client.get(reverse("memory-list"), params)
    assert response.status_code == 200
    return [memory.pk for memory in response.context["memories"]]


@pytest.mark.django_db
def test_it_lists_every_status_newest_first_and_only_the_owners(alice_client, alice, bob):
    old = make_memory(alice, "Old fact.", created_at=timezone.now() - timedelta(days=5))
    proposal = Memory.propose(alice, "A proposal.", "semantic")
    archived = make_memory(alice, "Archived fact.", status="archived")
    make_memory(bob, "Bob's fact.")

    assert listed(alice_client, status="all") == [archived.pk, proposal.pk, old.pk]
    # Without a status the list shows the active ones.
    assert listed(alice_client) == [old.pk]
    body = alice_client.get(reverse("memory-list"), {"status": "all"}).content.decode()
    assert reverse("memory-detail", args=[old.pk]) in body
    assert "Bob's fact." not in body
    assert "3 memories" in body


@pytest.mark.django_db
def test_it_filters_by_status_type_and_source(alice_client, alice):
    fact = make_memory(alice, "A fact.", type="semantic", source="api")
    preference = make_memory(alice, "A preference.", type="preference", source="import")
    proposal = Memory.propose(alice, "A proposal.", "preference", source="extraction")

    assert listed(alice_client, status="active") == [preference.pk, fact.pk]
    assert listed(alice_client, status="all", type="preference") == [proposal.pk, preference.pk]
    assert listed(alice_client, status="all", source="extraction") == [proposal.pk]
    assert listed(alice_client, status="active", type="preference") == [preference.pk]


@pytest.mark.django_db
def test_it_filters_by_entity_ignoring_case(alice_client, alice):
    lisbon = make_memory(alice, "Alice lives in Lisbon.", entities=["Lisbon", "Alice"])
    make_memory(alice, "Alice likes tea.", entities=["Alice"])
    assert listed(alice_client, entity="lisbon") == [lisbon.pk]
    assert listed(alice_client, entity="Lis") == []


@pytest.mark.django_db
def test_it_searches_the_text(alice_client, alice):
    seats = make_memory(alice, "Alice prefers aisle seats on long flights.")
    make_memory(alice, "Alice is vegetarian.")
    assert listed(alice_client, q="seat") == [seats.pk]  # stemmed full-text match
    assert listed(alice_client, q="aisle seat") == [seats.pk]
    assert listed(alice_client, q="isle") == [seats.pk]  # substring match
    assert listed(alice_client, q="piano") == []


@pytest.mark.django_db
def test_it_filters_by_date_range(alice_client, alice):
    tz = timezone.get_current_timezone()
    january = make_memory(alice, "January.", created_at=datetime(2026, 1, 15, 12, tzinfo=tz))
    march = make_memory(alice, "March.", created_at=datetime(2026, 3, 15, 12, tzinfo=tz))
    make_memory(alice, "May.", created_at=datetime(2026, 5, 15, 12, tzinfo=tz))
    assert listed(alice_client, created_from="2026-01-01", created_to="2026-03-31") == [
        march.pk,
        january.pk,
    ]
    assert listed(alice_client, created_to="2026-01-15") == [january.pk]


@pytest.mark.django_db
def test_it_sorts(alice_client, alice):
    low = make_memory(alice, "Low.", confidence=0.2, created_at=timezone.now() - timedelta(days=2))
    high = make_memory(alice, "High.", confidence=0.95, created_at=timezone.now())
    middle = make_memory(
        alice, "Middle.", confidence=0.5, created_at=timezone.now() - timedelta(days=1)
    )
    assert listed(alice_client, sort="oldest") == [low.pk, middle.pk, high.pk]
    assert listed(alice_client, sort="confidence") == [high.pk, middle.pk, low.pk]


@pytest.mark.django_db
def test_it_paginates(alice_client, alice):
    for n in range(30):
        make_memory(alice, f"Fact {n}.")
    first = alice_client.get(reverse("memory-list"))
    assert len(first.context["memories"]) == 25
    assert b"Page 1 of 2" in first.content
    assert b"?page=2" in first.content
    second = alice_client.get(reverse("memory-list"), {"page": 2, "type": "semantic"})
    assert len(second.context["memories"]) == 5
    assert b'href="?page=1&amp;type=semantic"' in second.content


@pytest.mark.django_db
def test_it_shows_filter_errors_instead_of_failing(alice_client, alice):
    make_memory(alice)
    response = alice_client.get(reverse("memory-list"), {"status": "bogus", "created_from": "x"})
    assert response.status_code == 200
    assert "status" in response.context["form"].errors
    assert b"Enter a valid date." in response.content


@pytest.mark.django_db
def test_it_explains_an_empty_result(alice_client, alice):
    make_memory(alice)
    assert b"No memories match" in alice_client.get(reverse("memory-list"), {"q": "zzz"}).content


@pytest.mark.django_db
def test_it_has_an_empty_state_for_a_new_owner(alice_client):
    assert b"No memories yet" in alice_client.get(reverse("memory-list")).content


@pytest.mark.django_db
def test_it_rejects_post(alice_client):
    assert alice_client.post(reverse("memory-list")).status_code == 405


@pytest.mark.django_db
def test_it_counts_matches_in_the_singular_and_the_plural(alice_client, alice):
    make_memory(alice, "Alice prefers aisle seats.", type="preference")
    make_memory(alice, "Alice likes window seats.", type="preference")
    make_memory(alice, "Alice is vegetarian.")
    one = alice_client.get(reverse("memory-list"), {"q": "aisle"}).content.decode()
    assert "1 memory matches these filters." in one
    two = alice_client.get(reverse("memory-list"), {"type": "preference"}).content.decode()
    assert "2 memories match these filters." in two
    assert "3 memories." in alice_client.get(reverse("memory-list")).content.decode()


@pytest.mark.django_db
def test_it_does_not_claim_a_count_for_filters_it_could_not_apply(alice_client, alice):
    make_memory(alice, "Alice is vegetarian.")
    response = alice_client.get(reverse("memory-list"), {"q": "zzz", "created_from": "x"})
    body = response.content.decode()
    assert "match these filters" not in body and "matches these filters" not in body
    assert "These filters were not applied" in body
    assert response.context["invalid"] is True
    # The list is the unfiltered one, said to be so.
    assert [memory.content for memory in response.context["memories"]] == ["Alice is vegetarian."]


@pytest.mark.django_db
def test_it_finds_text_ignoring_accents_and_highlights_it(alice_client, alice):
    nata = make_memory(alice, "Loves pastéis de nata from Belém.")
    make_memory(alice, "Alice is vegetarian.")
    response = alice_client.get(reverse("memory-list"), {"q": "PASTEIS belem"})
    assert [memory.pk for memory in response.context["memories"]] == [nata.pk]
    body = response.content.decode()
    assert "Loves <mark>pastéis</mark> de nata from <mark>Belém</mark>." in body


@pytest.mark.django_db
def test_it_escapes_what_it_highlights(alice_client, alice):
    make_memory(alice, "Likes <b>bold</b> coffee.")
    body = alice_client.get(reverse("memory-list"), {"q": "bold"}).content.decode()
    assert "&lt;b&gt;<mark>bold</mark>&lt;/b&gt;" in body


@pytest.mark.django_db
def test_it_names_types_both_ways_and_sources_in_one_vocabulary(alice_client, alice):
    token, _ = ApiToken.issue(alice, "laptop assistant")
    make_memory(
        alice,
        "Alice runs.",
        source="api",
        session_id="chat-7",
        metadata={"api_token": {"id": token.pk, "name": "laptop assistant", "prefix": "tm_x"}},
    )
    body = alice_client.get(reverse("memory-list")).content.decode()
    assert '<option value="semantic">Fact (semantic)</option>' in body
    assert '<option value="episodic">Event (episodic)</option>' in body
    assert 'title="Fact (semantic)"' in body
    assert "<span>API</span>" in body
    assert "token “<bdi>laptop assistant</bdi>”" in body
    assert "session <bdi>chat-7</bdi>" in body


@pytest.mark.django_db
def test_it_links_whole_rows_and_marks_memory_text_for_either_direction(alice_client, alice):
    memory = make_memory(alice, "اسم زوجته ليلى", entities=["ليلى"])
    body = alice_client.get(reverse("memory-list")).content.decode()
    link = f'<a href="{reverse("memory-detail", args=[memory.pk])}" class="row-link" dir="auto">'
    assert link in body
    assert 'class="linked-row"' in body
    assert 'dir="auto">ليلى</a>' in body


@pytest.mark.django_db
def test_it_offers_the_add_form(alice_client, alice):
    body = alice_client.get(reverse("memory-list")).content.decode()
    assert f'action="{reverse("memory-add")}"' in body
    assert 'id="add-content"' in body and 'id="add-type"' in body
    assert 'name="next" value="/memories/"' in body
