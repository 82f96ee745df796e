from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from retrieval import constants
from retrieval.models import RetrievalStamp
from retrieval.render import BLOCK_CLOSE, BLOCK_OPEN
from retrieval.tokens import count_tokens
from tests.base import make_memory


def inspect(client, message: str, **data):
    payload = {"message": message, "pipeline": "fusion", "budget": 1024, **data}
    return client.post(reverse("inspect"), payload)


@pytest.fixture
def memories(alice):
    now = timezone.now()
    return {
        "seats": make_memory(
            alice,
            "Alice prefers aisle seats on long-haul flights.",
            "preference",
            entities=["Alice"],
            created_at=now - timedelta(days=2),
        ),
        "birthday": make_memory(
            alice,
            "Alice's birthday is on 4 May.",
            entities=["Alice"],
            created_at=now - timedelta(days=30),
        ),
        "cat": make_memory(alice, "Alice has a cat called Biscuit.", entities=["Biscuit"]),
    }


@pytest.mark.django_db
def test_it_shows_the_form(alice_client):
    response = alice_client.get(reverse("inspect"))
    assert response.status_code == 200
    assert response.context["result"] is None
    assert b'name="message"' in response.content
    assert b"dry run" in response.content


@pytest.mark.django_db
def test_it_shows_legs_scores_and_the_fenced_block(alice_client, memories):
    response = inspect(alice_client, "Which seat do I like on flights, and when is my birthday?")

    assert response.status_code == 200
    result = response.context["result"]
    assert result.pipeline == "fusion"
    packed = {item.memory.pk for item in result.memories}
    assert {memories["seats"].pk, memories["birthday"].pk} <= packed
    assert set(result.legs) == {"vector", "text", "entity"}
    assert result.legs["text"].status == "ok"
    body = response.content.decode()
    assert "&lt;memory source=&quot;timothy-memory&quot; trust=&quot;data&quot;&gt;" in body
    assert "[preference] Alice prefers aisle seats on long-haul flights." in body
    assert f"{result.block_tokens} of 1024 tokens" in body
    assert "relevance" in body and "× age" in body and "× type" in body
    assert body.count("data-candidate=") == len(result.memories) + len(result.cut)


@pytest.mark.django_db
def test_it_never_stamps_recall(alice_client, memories):
    inspect(alice_client, "seats flights birthday Alice")
    assert not RetrievalStamp.objects.exists()


@pytest.mark.django_db
def test_it_shows_what_was_cut_for_the_budget(alice_client, memories):
    response = inspect(alice_client, "Alice seats birthday", budget=60)
    result = response.context["result"]
    reasons = [item.cut_reason for item in result.cut]
    # What the budget left out, and what fell past where the scores fall off.
    assert "over_budget" in reasons and set(reasons) <= {"over_budget", "past_falloff"}
    if "past_falloff" in reasons:
        assert b"Cut: where the scores fall off" in response.content
    assert result.block_tokens <= 60
    assert b"Cut: over the token budget" in response.content


@pytest.mark.django_db
def test_it_runs_the_freshness_pipeline(alice_client, memories):
    response = inspect(alice_client, "aisle seats on flights", pipeline="freshness")
    result = response.context["result"]
    assert result.pipeline == "freshness"
    assert result.memories[0].memory.pk == memories["seats"].pk
    assert "bm25" in result.legs
    assert b"0.7 \xc3\x97 relevance" in response.content


@pytest.mark.django_db
def test_it_limits_the_fusion_legs(alice_client, memories):
    response = inspect(alice_client, "Biscuit", legs=["entity"])
    result = response.context["result"]
    assert set(result.legs) == {"entity"}
    assert [item.memory.pk for item in result.memories] == [memories["cat"].pk]


@pytest.mark.django_db
def test_it_reads_the_store_as_of_a_time(alice_client, memories):
    as_of = timezone.localtime(timezone.now() - timedelta(days=10)).strftime("%Y-%m-%dT%H:%M")
    response = inspect(alice_client, "Alice seats birthday", as_of=as_of)
    result = response.context["result"]
    assert {item.memory.pk for item in result.memories} == {memories["birthday"].pk}


@pytest.mark.django_db
def test_it_only_searches_the_owners_memories(alice_client, bob, memories):
    make_memory(bob, "Bob prefers aisle seats too.", entities=["Alice"])
    response = inspect(alice_client, "Alice aisle seats")
    result = response.context["result"]
    owners = {item.memory.owner_id for item in [*result.memories, *result.cut]}
    assert owners == {memories["seats"].owner_id}
    assert b"Bob prefers" not in response.content


@pytest.mark.django_db
def test_it_explains_an_empty_result(alice_client, memories):
    response = inspect(alice_client, "quantum chromodynamics")
    assert response.context["result"].block == ""
    assert b"No memory matched this message." in response.content
    assert b"Empty: nothing would be added" in response.content


@pytest.mark.django_db
def test_it_validates_the_form(alice_client):
    response = inspect(alice_client, "", budget=0, pipeline="nonsense")
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"message", "budget", "pipeline"}
    assert response.context["result"] is None


@pytest.mark.django_db
def test_it_rejects_other_methods(alice_client):
    assert alice_client.put(reverse("inspect")).status_code == 405


@pytest.mark.django_db
def test_it_needs_a_csrf_token(csrf_client):
    response = csrf_client.post(reverse("inspect"), {"message": "hi", "pipeline": "fusion"})
    assert response.status_code == 403


@pytest.mark.django_db
def test_it_starts_each_result_with_one_plain_sentence(alice_client, memories):
    response = inspect(
        alice_client, "Which seat does Alice like on flights?", legs=["text", "entity"]
    )
    seats = next(
        candidate
        for candidate in response.context["candidates"]
        if candidate.memory.pk == memories["seats"].pk
    )
    assert seats.sentence.startswith(
        "Found by the words <em><bdi>seat</bdi></em> and <em><bdi>flights</bdi></em>, "
        "and by the name <em><bdi>Alice</bdi></em>; 2\xa0days old (its age does not lower it)"
    )
    assert "; in the block at position " in seats.sentence
    body = response.content.decode()
    assert f'<p class="explain" data-explain>{seats.sentence}</p>' in body
    # The rank details are text on the page, not tooltips.
    for step in seats.steps:
        assert f"<li>{step}</li>" in body


@pytest.mark.django_db
def test_it_shows_the_formula_with_the_numbers_in_force(alice_client, memories, settings):
    body = inspect(alice_client, "Alice seats").content.decode()
    assert "1/(60" not in body
    low, high = constants.DEFAULT_PROFILE.semantic_gate
    assert f"clip((similarity − {low:g}) ÷ {high - low:g}, 0, 1)" in body
    assert f"{constants.DEFAULT_PROFILE.relative_cut:.0%} of the best" in body
    settings.RETRIEVAL_PROFILE = "seed"
    body = inspect(alice_client, "Alice seats").content.decode()
    seed = constants.SEED_PROFILE
    assert f"k = {seed.rrf_k:g}; leg weights: vector 1, text 1, entity 1." in body
    assert f"A score of {seed.min_score:g} or below is left out." in body
    assert f"Halves every {seed.decay_half_life_days:g} days" in body


@pytest.mark.django_db
def test_it_explains_the_block_its_order_and_the_fence_it_always_costs(alice_client, memories):
    response = inspect(alice_client, "Alice seats birthday cat")
    result = response.context["result"]
    fence = count_tokens(BLOCK_OPEN + BLOCK_CLOSE)
    body = response.content.decode()
    assert f"the fence: {fence} tokens, the same whatever is packed" in body
    assert f"{len(result.memories)} memories: {result.block_tokens - fence} tokens" in body
    assert f"unused: {1024 - result.block_tokens} tokens" in body
    assert "best first, then the 3rd, 4th and so on, and the second-best last" in body
    assert (
        '<button type="button" class="button small" data-copy-block="recall-block" hidden>' in body
    )
    # Ready for a Content-Security-Policy: no inline styles or scripts.
    assert "style=" not in body
    assert "<script>" not in body


@pytest.mark.django_db
def test_it_explains_the_freshness_pipeline_step_by_step(alice_client, memories):
    body = inspect(alice_client, "aisle seats", pipeline="freshness").content.decode()
    assert "1. BM25" in body and "2. Rerank" in body and "3. Blend" in body
    assert f"The {constants.BM25_TOP} memories sharing the most telling words" in body
    assert "What each stage found" in body
    # The fusion-only control is marked so the page script hides it for freshness.
    assert '<fieldset class="field bare" data-fusion-only>' in body
    assert "Legs (fusion only)" in body
