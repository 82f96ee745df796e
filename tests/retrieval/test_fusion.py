from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memories.models import Memory
from retrieval.constants import (
    ASKED_ASPECT_FACTOR,
    CURRENT_STATE_HALF_LIFE_DAYS,
    DEFAULT_PROFILE,
    SEED_PROFILE,
    SUCCESSOR_MIN_SIMILARITY,
    SUPERSEDED_FACTOR,
)
from retrieval.fusion import (
    decay,
    fuse,
    reference_time,
    rrf_ranks,
    rrf_score,
    semantic_gate,
    standardised,
    wants_current_state,
)
from retrieval.results import ScoredMemory

AS_OF = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def memory(
    pk: int,
    type: str = "semantic",
    *,
    days: float = 0.0,
    confirmed_days=None,
    embedding=None,
    content: str = "",
) -> Memory:
    created = AS_OF - timedelta(days=days)
    confirmed = None if confirmed_days is None else AS_OF - timedelta(days=confirmed_days)
    return Memory(
        pk=pk,
        owner_id=1,
        type=type,
        content=content or f"m{pk}",
        created_at=created,
        last_confirmed_at=confirmed,
        embedding=embedding,
    )


def ranked(*ids: int, step: float = 1.0) -> list[tuple[int, float]]:
    """A leg's list: the first id scores highest, each next one ``step`` less."""
    return [(memory_id, 10.0 - step * index) for index, memory_id in enumerate(ids)]


# --- the seed profile: RRF k = 60, decay on every type ---------------------------------


def test_it_sums_reciprocal_ranks_over_legs_under_the_seed_profile():
    ranks = rrf_ranks({"vector": ranked(7, 8), "text": ranked(8), "entity": []})
    assert ranks == {7: {"vector": 1}, 8: {"vector": 2, "text": 1}}
    assert rrf_score(ranks[8], SEED_PROFILE) == pytest.approx(1 / 62 + 1 / 61)
    assert rrf_score(ranks[7], SEED_PROFILE) == pytest.approx(1 / 61)


def test_it_halves_the_seed_score_at_ninety_days_for_every_type():
    for memory_type in ("semantic", "preference", "episodic", "reflection"):
        assert decay(memory(1, memory_type, days=90), AS_OF, SEED_PROFILE) == pytest.approx(0.5)
    assert decay(memory(1, days=400, confirmed_days=180), AS_OF, SEED_PROFILE) == pytest.approx(
        0.25
    )


def test_it_ignores_a_confirmation_after_as_of():
    late = memory(1, days=90, confirmed_days=-5)
    assert reference_time(late, AS_OF) == late.created_at
    assert decay(late, AS_OF, SEED_PROFILE) == pytest.approx(0.5)


def test_it_multiplies_rrf_decay_and_type_weight_under_the_seed_profile():
    reflection = memory(1, "reflection", days=45)
    kept, cut = fuse({"text": ranked(1)}, {1: reflection}, AS_OF, profile=SEED_PROFILE)
    assert cut == []
    [item] = kept
    assert item.parts["rrf"] == pytest.approx(1 / 61)
    assert item.parts["decay"] == pytest.approx(0.5**0.5)
    assert item.parts["weight"] == 0.8
    assert item.score == pytest.approx(1 / 61 * 0.5**0.5 * 0.8)
    assert item.parts["final"] == item.score


def test_it_cuts_below_the_seeds_minimum_score():
    # 1/61 = 0.0164: above 0.005 fresh, below it after two half-lives and a bit.
    kept, cut = fuse(
        {"vector": ranked(1, 2)},
        {1: memory(1, days=0), 2: memory(2, days=200)},
        AS_OF,
        profile=SEED_PROFILE,
    )
    assert [item.memory.pk for item in kept] == [1]
    assert [item.memory.pk for item in cut] == [2]
    assert cut[0].cut_reason == "below_min_score"


def test_it_cuts_a_score_equal_to_the_minimum():
    # Seed 000 says "a hard minScore cutoff"; a score at the minimum is cut too.
    at_minimum = replace(SEED_PROFILE, min_score=1 / 61)
    kept, cut = fuse({"vector": ranked(1)}, {1: memory(1)}, AS_OF, profile=at_minimum)
    assert kept == []
    assert cut[0].score == 1 / 61
    assert cut[0].cut_reason == "below_min_score"


# --- the default profile: standardised scores -----------------------------------------


def test_it_standardises_a_legs_scores():
    z = standardised([(1, 3.0), (2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0)])
    # mean 1.4, spread 0.8: the winner stands 2 above, the rest below (0).
    assert z[1] == pytest.approx(2.0)
    assert z[2] == z[3] == z[4] == z[5] == 0.0


def test_it_measures_a_short_list_against_memories_it_did_not_find():
    # One match among an owner's memories: against four 0s it stands out by 2.
    assert standardised([(1, 5.0)]) == {1: pytest.approx(2.0)}
    z = standardised([(1, 5.0), (2, 3.0)])
    assert z[1] > z[2] > 0


def test_it_finds_no_standout_among_equals():
    assert standardised([(pk, 2.0) for pk in range(1, 7)]) == {pk: 0.0 for pk in range(1, 7)}


def test_it_lets_a_clear_winner_of_one_leg_beat_a_crowd_of_the_other():
    # The text leg's candidates all share one common word (equal scores: no
    # standout); the vector leg has one memory far above the rest.
    memories = {pk: memory(pk) for pk in range(1, 9)}
    kept, _ = fuse(
        {
            "text": [(pk, 4.0) for pk in (2, 3, 4, 7, 8)],
            "vector": [(1, 0.8), (5, 0.2), (6, 0.19), (2, 0.18), (3, 0.17)],
        },
        memories,
        AS_OF,
        profile=DEFAULT_PROFILE,
    )
    assert [item.memory.pk for item in kept] == [1]


def test_it_weighs_a_rare_name_above_a_common_one():
    # The entity leg scores Σ ln(1 + N / memories naming it): one memory names a
    # rare name, six name the owner's own (all alike: no standout).
    memories = {pk: memory(pk) for pk in range(1, 8)}
    kept, _ = fuse(
        {"entity": [(1, 3.0)] + [(pk, 0.4) for pk in range(2, 8)]},
        memories,
        AS_OF,
        profile=DEFAULT_PROFILE,
    )
    assert kept[0].memory.pk == 1
    assert kept[0].parts["contributions"]["entity"] > 0
    assert all(item.score == 0 for item in kept[1:]) or len(kept) == 1


def test_it_gates_word_matches_by_meaning():
    low, high = DEFAULT_PROFILE.semantic_gate
    assert semantic_gate(low - 0.05, DEFAULT_PROFILE) == 0.0
    assert semantic_gate((low + high) / 2, DEFAULT_PROFILE) == pytest.approx(0.5)
    assert semantic_gate(high + 0.2, DEFAULT_PROFILE) == 1.0
    # Without vectors there is no evidence either way.
    assert semantic_gate(None, DEFAULT_PROFILE) == 1.0
    assert semantic_gate(0.0, SEED_PROFILE) == 1.0


def test_it_drops_a_text_match_on_a_memory_of_unrelated_meaning():
    query = [1.0, 0.0]
    related = memory(1, embedding=[0.9, 0.1])
    unrelated = memory(2, embedding=[0.0, 1.0])
    fillers = {pk: memory(pk, embedding=[0.5, 0.5]) for pk in (3, 4, 5)}
    kept, cut = fuse(
        {"text": [(2, 9.0), (1, 8.0), (3, 1.0), (4, 1.0), (5, 1.0)]},
        {1: related, 2: unrelated, **fillers},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query_embedding=query,
    )
    by_pk = {item.memory.pk: item for item in [*kept, *cut]}
    assert by_pk[2].parts["gate"] == 0.0
    assert by_pk[2].score == 0.0
    assert kept[0].memory.pk == 1


def test_it_never_decays_by_age_alone_under_the_default_profile():
    for memory_type in ("semantic", "preference", "episodic", "reflection"):
        assert decay(memory(1, memory_type, days=700), AS_OF, DEFAULT_PROFILE) == 1.0


def test_it_cuts_candidates_far_below_the_best():
    memories = {pk: memory(pk) for pk in range(1, 12)}
    vector = [(1, 1.0)] + [(pk, 0.5 - pk / 1000) for pk in range(2, 12)]
    kept, cut = fuse({"vector": vector}, memories, AS_OF, profile=DEFAULT_PROFILE)
    best = kept[0].score
    assert all(item.score >= DEFAULT_PROFILE.relative_cut * best for item in kept)
    reasons = {item.cut_reason for item in cut}
    assert reasons <= {"below_min_score", "below_relative_cut"}
    assert all(
        item.score < DEFAULT_PROFILE.relative_cut * best
        for item in cut
        if item.cut_reason == "below_relative_cut"
    )


def test_it_drops_ids_it_was_not_given_and_breaks_ties_newest_first():
    kept, _ = fuse(
        {"entity": [(4, 1.0), (5, 1.0), (9, 1.0)]},
        {4: memory(4), 5: memory(5)},
        AS_OF,
        profile=DEFAULT_PROFILE,
    )
    assert [item.memory.pk for item in kept] == [5, 4]


# --- current state -------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "Which phone do I use now?",
        "Where does Ana live these days?",
        "Am I still on metoprolol?",
        "What's my current job title?",
        "Is Helen working at the library any more?",
    ],
)
def test_it_recognises_a_question_about_how_things_stand(query):
    assert wants_current_state(query)


@pytest.mark.parametrize(
    "query", ["Which phone did I buy in 2019?", "Where was I born?", "knowing what I know"]
)
def test_it_leaves_other_questions_alone(query):
    assert not wants_current_state(query)


def current_state_case(query: str):
    old_fact = memory(
        1, "semantic", days=600, embedding=[1.0, 0.0, 0.0], content="Uses a Samsung Galaxy phone."
    )
    new_event = memory(
        2, "episodic", days=30, embedding=[0.8, 0.6, 0.0], content="Bought a Pixel 9 phone."
    )
    other = memory(
        3, "semantic", days=10, embedding=[0.0, 0.0, 1.0], content="The monthly plan costs £12."
    )
    fillers = {pk: memory(pk, days=300, embedding=[0.0, 1.0, 0.0]) for pk in (4, 5, 6)}
    return fuse(
        {"vector": [(1, 0.8), (2, 0.6), (3, 0.1), (4, 0.1), (5, 0.1), (6, 0.1)]},
        {1: old_fact, 2: new_event, 3: other, **fillers},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query=query,
        query_embedding=[1.0, 0.0, 0.0],
    )


def test_it_prefers_the_newer_memory_about_the_same_subject_when_asked_how_things_stand():
    kept, _ = current_state_case("Which phone do I use now?")
    assert kept[0].memory.pk == 2
    old = next(item for item in kept if item.memory.pk == 1)
    new = next(item for item in kept if item.memory.pk == 2)
    assert old.parts["superseded_by_newer"] == 2
    assert old.parts["superseded_about"]["aspect"] == "phone"
    # Below the memory that replaces it, whatever its own relevance.
    before_age = min(old.parts["relevance"], new.parts["relevance"]) * SUPERSEDED_FACTOR
    expected = before_age * 0.5 ** (600 / CURRENT_STATE_HALF_LIFE_DAYS)
    # Still about what was asked (the owner's phone), as is the memory replacing it.
    assert old.parts["asked_aspect"] == new.parts["asked_aspect"] == "phone"
    assert old.parts["asked_factor"] == ASKED_ASPECT_FACTOR
    assert old.score == pytest.approx(expected * ASKED_ASPECT_FACTOR)
    # The newer memory on another topic (the plan's price) demotes nothing.
    assert "superseded_by_newer" not in new.parts


def older_and_newer(older: Memory, newer: Memory, query: str) -> list[ScoredMemory]:
    """Fuse an older memory the vector leg puts first and a newer one it puts
    second, among fillers of another meaning; return what is kept."""
    fillers = {pk: memory(pk, days=300, embedding=[0.0, 1.0]) for pk in (3, 4, 5)}
    kept, _ = fuse(
        {"vector": [(1, 0.9), (2, 0.5), (3, 0.1), (4, 0.1), (5, 0.1)]},
        {1: older, 2: newer, **fillers},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query=query,
        query_embedding=[1.0, 0.0],
    )
    return kept


def test_a_newer_manager_replaces_the_old_one_however_it_is_said():
    kept = older_and_newer(
        memory(1, days=600, embedding=[1.0, 0.0], content="Her manager at Fernwood is Hannah."),
        memory(2, days=10, embedding=[0.8, 0.6], content="At Loomwork she reports to Tobi."),
        "Who is my manager now?",
    )
    assert kept[0].memory.pk == 2
    assert next(item for item in kept if item.memory.pk == 1).parts["superseded_by_newer"] == 2
    assert kept[0].parts["asked_aspect"] == "manager"


def test_a_phone_named_without_its_possessive_is_replaced_by_the_one_bought_since():
    kept = older_and_newer(
        memory(1, days=500, embedding=[1.0, 0.0], content="Phone is a Samsung Galaxy S21."),
        memory(2, "episodic", days=120, embedding=[0.8, 0.6], content="Bought an iPhone 15."),
        "What phone am I using at the moment?",
    )
    assert kept[0].memory.pk == 2
    assert next(item for item in kept if item.memory.pk == 1).parts["superseded_by_newer"] == 2


def test_another_persons_newer_fact_does_not_make_the_owners_out_of_date():
    mine = memory(1, days=400, embedding=[1.0, 0.0], content="Lives in Lisbon.")
    brother = memory(2, days=5, embedding=[0.9, 0.44], content="My brother lives in Porto.")
    kept, _ = fuse(
        {"vector": [(1, 0.9), (2, 0.8)]},
        {1: mine, 2: brother},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query="Where do I live now?",
        query_embedding=[1.0, 0.0],
    )
    assert kept[0].memory.pk == 1
    assert all("superseded_by_newer" not in item.parts for item in kept)


def test_it_favours_a_memory_about_the_aspect_asked_of_when_asked_how_things_stand():
    hives = memory(1, days=10, embedding=[1.0, 0.0], content="Moved four hives to the hill.")
    home = memory(2, "episodic", days=30, embedding=[0.95, 0.31], content="")
    home.content = "Moved into a cottage in Port Chalmers."
    sisters = memory(3, days=5, embedding=[0.97, 0.24], content="My sister lives in Dunedin.")
    kept, _ = fuse(
        {"vector": [(1, 0.9), (3, 0.88), (2, 0.87)]},
        {1: hives, 2: home, 3: sisters},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query="Which town do I live in now?",
        query_embedding=[1.0, 0.0],
    )
    assert [item.memory.pk for item in kept][0] == 2
    parts = {item.memory.pk: item.parts for item in kept}
    assert (parts[2]["asked_aspect"], parts[2]["asked_factor"]) == ("home", ASKED_ASPECT_FACTOR)
    # Another aspect of the owner's, and the same aspect of another person's, gain nothing.
    assert "asked_aspect" not in parts[1]
    assert "asked_aspect" not in parts[3]


def test_it_keeps_the_best_match_first_for_other_questions():
    kept, _ = current_state_case("Which phone did I buy?")
    assert kept[0].memory.pk == 1
    assert "superseded_by_newer" not in kept[0].parts
    assert "current_state" not in kept[0].parts


def test_it_never_takes_an_event_for_out_of_date():
    event = memory(1, "episodic", days=600, embedding=[1.0, 0.0])
    newer = memory(2, "episodic", days=10, embedding=[1.0, 0.05])
    kept, _ = fuse(
        {"vector": [(1, 0.9), (2, 0.5), (3, 0.1)]},
        {1: event, 2: newer, 3: memory(3, embedding=[0.0, 1.0])},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query="What happened lately?",
        query_embedding=[1.0, 0.0],
    )
    assert all("superseded_by_newer" not in item.parts for item in kept)


def about(memory: Memory, aspect: str) -> Memory:
    """``memory`` as the owner's, about ``aspect`` (as the rules or the owner set it)."""
    memory.about_subject = memory.about_kind = "self"
    memory.about_aspect = aspect
    memory.about_set_by = "owner"
    return memory


def with_successors(*, older: Memory, later: list[Memory], query: str, calls=None):
    """Fuse ``older`` (the vector leg's best) among fillers, the store holding
    ``later`` as what was written after it about the same subject and aspect."""
    fillers = {pk: memory(pk, days=300, embedding=[0.0, 1.0, 0.0]) for pk in (3, 4, 5)}

    def successors_of(olders):
        if calls is not None:
            calls.append([item.pk for item in olders])
        found = {item.pk: list(later) for item in olders if item.pk == older.pk}
        return found, {item.pk: item.embedding for item in later}

    return fuse(
        {"vector": [(older.pk, 0.9), (3, 0.1), (4, 0.1), (5, 0.1)]},
        {older.pk: older, **fillers},
        AS_OF,
        profile=DEFAULT_PROFILE,
        query=query,
        query_embedding=[1.0, 0.0, 0.0],
        successors_of=successors_of,
    )


def test_a_later_memory_no_leg_found_answers_what_its_predecessor_matched():
    older = about(
        memory(1, days=600, embedding=[1.0, 0.0, 0.0], content="Manager: Hannah."), "manager"
    )
    # 0.5 alike the older memory; nothing in it the question's words or meaning find.
    later = about(
        memory(9, days=20, embedding=[0.5, 0.0, 0.866], content="Reports to Tobi."), "manager"
    )
    kept, _ = with_successors(older=older, later=[later], query="Who is my manager now?")
    assert kept[0].memory.pk == 9
    parts = {item.memory.pk: item.parts for item in kept}
    assert parts[9]["successor_of"] == 1
    assert parts[9]["successor_likeness"] == pytest.approx(0.5, abs=1e-3)
    assert parts[9]["relevance"] == pytest.approx(parts[1]["relevance"] * 0.5, rel=1e-3)
    assert parts[9]["ranks"] == {}
    # Lent relevance is no sign of a replacement: the older memory only loses by its age.
    assert "superseded_by_newer" not in parts[1]


def test_a_later_memory_too_unlike_its_predecessor_does_not_join():
    older = about(
        memory(1, days=600, embedding=[1.0, 0.0, 0.0], content="Manager: Hannah."), "manager"
    )
    likeness = SUCCESSOR_MIN_SIMILARITY - 0.05
    later = about(
        memory(9, days=20, embedding=[likeness, 0.0, (1 - likeness**2) ** 0.5]), "manager"
    )
    kept, cut = with_successors(older=older, later=[later], query="Who is my manager now?")
    assert 9 not in {item.memory.pk for item in [*kept, *cut]}
    assert kept[0].memory.pk == 1


def test_a_memory_matched_by_another_aspect_than_asked_lends_nothing():
    # "Where do I live now?" names the home; the best match is about the car.
    older = about(
        memory(1, days=600, embedding=[1.0, 0.0, 0.0], content="No licence; living in London."),
        "car",
    )
    later = about(memory(9, days=20, embedding=[0.6, 0.0, 0.8], content="Uses Zipcar."), "car")
    kept, cut = with_successors(older=older, later=[later], query="Where do I live now?")
    assert 9 not in {item.memory.pk for item in [*kept, *cut]}


def test_a_later_memory_about_the_same_aspect_does_not_outrank_a_recent_answer():
    # The salary, then a remark about work (both "job"): the remark is less alike
    # than the salary's own match, and the salary is recent, so it stays first.
    older = about(memory(1, days=60, embedding=[1.0, 0.0, 0.0], content="Salary is €2,050."), "job")
    later = about(memory(9, days=20, embedding=[0.42, 0.0, 0.907], content="Enjoys work."), "job")
    kept, _ = with_successors(older=older, later=[later], query="What is my salary currently?")
    assert [item.memory.pk for item in kept][:2] == [1, 9]
    assert "superseded_by_newer" not in kept[0].parts


def test_the_store_is_not_asked_for_later_memories_unless_the_question_is_about_now():
    older = about(
        memory(1, days=600, embedding=[1.0, 0.0, 0.0], content="Manager: Hannah."), "manager"
    )
    later = about(memory(9, days=20, embedding=[0.5, 0.0, 0.866]), "manager")
    calls: list = []
    kept, _ = with_successors(older=older, later=[later], query="Who was my manager?", calls=calls)
    assert calls == []
    assert 9 not in {item.memory.pk for item in kept}
    with_successors(older=older, later=[later], query="Who is my manager now?", calls=calls)
    assert calls and 1 in calls[0]


def test_settings_accept_exactly_the_profiles_there_are():
    from retrieval.constants import PROFILES
    from retrieval.names import PROFILE_NAMES

    assert tuple(PROFILES) == PROFILE_NAMES
