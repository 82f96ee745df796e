"""A store like an owner's after some months: family, work, preferences, dated
events, an edit, an Arabic memory, a long one, API tokens (one revoked), and
events months old, so that relative times are as long as they get
("(11 months ago)"). For the phone-layout tests and the documentation's
screenshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from memories.models import ApiToken, Memory, MemoryEvent
from tests.base import make_memory
from tests.fakes.openai_server import deterministic_vector

LONG_RECIPE = (
    "Grandma Rosa's bolo de arroz, the way Olivia makes it for birthdays. "
    + "Beat the eggs with the sugar until pale, fold in the rice flour and the melted "
    "butter, rest the batter overnight, and bake in paper collars at 200 °C. " * 18
).strip()

# The message the inspector is asked about, and the memory it means.
COFFEE_QUESTION = "How do I take my coffee in the morning?"


@dataclass
class Walk:
    coffee: Memory
    arabic: Memory
    recipe: Memory
    nata: Memory
    chain_head: Memory
    token: ApiToken
    revoked: ApiToken


def _old(memory: Memory, days: int) -> Memory:
    moment = timezone.now() - timedelta(days=days)
    Memory.objects.filter(pk=memory.pk).update(created_at=moment, last_confirmed_at=moment)
    MemoryEvent.objects.create(
        memory=memory, owner_id=memory.owner_id, action="created", via="api", at=moment
    )
    memory.refresh_from_db()
    return memory


def seed_walk(owner, *, embeddings: bool = False) -> Walk:
    now = timezone.now()

    def vector(text: str) -> list[float] | None:
        return deterministic_vector(text, 384) if embeddings else None

    def memory(text: str, type: str = Memory.Type.SEMANTIC, *, days: int, **fields) -> Memory:
        return _old(make_memory(owner, text, type, embedding=vector(text), **fields), days)

    token, _ = ApiToken.issue(owner, "laptop assistant")
    revoked, _ = ApiToken.issue(owner, "old phone")
    ApiToken.objects.filter(pk=token.pk).update(
        created_at=now - timedelta(days=330), last_used_at=now - timedelta(days=2)
    )
    ApiToken.objects.filter(pk=revoked.pk).update(
        created_at=now - timedelta(days=340),
        last_used_at=now - timedelta(days=300),
        revoked_at=now - timedelta(days=299),
    )
    provenance = {"api_token": {"id": token.pk, "name": token.name, "prefix": token.prefix}}

    coffee = memory(
        "Drinks coffee black, no sugar, first thing in the morning.",
        Memory.Type.PREFERENCE,
        days=95,
        entities=["coffee"],
        source=Memory.Source.API,
        session_id="chat-2026-08-27",
        metadata=provenance,
    )
    memory("His wife's name is Leila.", days=320, entities=["Leila"])
    memory("Leila's birthday is on 4 May.", Memory.Type.SEMANTIC, days=200, entities=["Leila"])
    memory("Prefers an aisle seat on long flights.", Memory.Type.PREFERENCE, days=40)
    memory(
        "Went to Lisbon in March for the architecture conference.",
        Memory.Type.EPISODIC,
        days=250,
        entities=["Lisbon"],
    )
    nata = memory(
        "Loves pastéis de nata from the bakery in Belém.",
        Memory.Type.PREFERENCE,
        days=180,
        entities=["Belém"],
    )
    arabic = memory("اسم والدته سلمى وتعيش في القاهرة.", days=150, entities=["سلمى"])
    recipe = memory(LONG_RECIPE, Memory.Type.REFLECTION, days=60, entities=["Rosa"])
    porto = memory("Works at Acme in Porto.", days=300, entities=["Acme", "Porto"])
    chain_head = porto.supersede(
        "Works at Acme in Lisbon since the move.",
        entities=["Acme", "Lisbon"],
        actor=owner,
        via="page",
        reason="moved in June",
    )
    Memory.propose(
        owner,
        "Takes his coffee with oat milk now.",
        Memory.Type.PREFERENCE,
        entities=["coffee"],
        session_id="chat-2026-11-30",
        metadata=provenance,
    )
    return Walk(
        coffee=coffee,
        arabic=arabic,
        recipe=recipe,
        nata=nata,
        chain_head=chain_head,
        token=token,
        revoked=revoked,
    )
