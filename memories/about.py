"""What a memory is about: whom or what (its subject), which attribute of it
(its aspect) and, for an event, which occurrence (its occasion).

"Lives in Porto now" and "My brother lives in Porto" are close in meaning and
in words, yet one is about the owner and the other about the brother; a 2027
trip to Rome is not a new version of a 2019 one; "Lives in Porto" and "Works in
Porto" share a subject and a city but not an aspect. The judgements that matter
to an owner (which memory a new fact repeats or updates, which memory is
current) compare these three, not closeness.

``derive_about`` reads them from the text by rules, written for the way an
assistant stores facts about its owner: "Lives in Porto.", "I take the train",
"My brother Tom lives in Porto.", "Ana's birthday is 3 May.", "Flew to Rome in
May 2019." The grammatical subject of the first clause decides the subject:
a sentence that opens with a verb or with I / he / she is about the owner; one
that opens with "my brother", "his wife's" or a name followed by a verb is
about that person (with the relation and the name when both are given, so that
two people called Ana are told apart by their roles or surnames). The aspect is
the most specific of the cue patterns below that the text matches. The occasion
of an event is the date its text names, or the day it was written.

Aspects are *single-valued* (one home, one employer, one commute at a time: a
different value is an update) or *multi-valued* (allergies, hobbies, friends,
trips: a different object is another fact, both true). ``relate`` in
memories/related.py reads that from ``MULTI_VALUED``.

The owner can correct any of it on the edit page (``set_by = "owner"``); a new
version whose text changes is derived again unless the owner gave its about.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import date, datetime

from memories.proper_nouns import proper_noun_spans

# Who or what a memory is about.
SELF = "self"
PERSON = "person"
PET = "pet"
ORGANISATION = "organisation"
THING = "thing"
SUBJECT_KINDS = (SELF, PERSON, PET, ORGANISATION, THING)

# Who set a memory's about.
SET_BY_RULES = "rules"
SET_BY_OWNER = "owner"
SET_BY_IMPORT = "import"
SET_BY_LLM = "llm"
SET_BY = (SET_BY_RULES, SET_BY_OWNER, SET_BY_IMPORT, SET_BY_LLM)

# Longest stored values (the model's fields and the forms read these).
MAX_SUBJECT_CHARS = 120
MAX_ASPECT_CHARS = 80
MAX_OCCASION_CHARS = 40

# The aspect of an event no cue pattern places.
UNPLACED_EVENT = "event"

# Two events without a date in their text, written this many days apart or
# more, are taken to be two occasions.
SAME_OCCASION_MAX_DAYS = 31


@dataclass(frozen=True)
class About:
    """Whom or what, which aspect, which occasion (events only)."""

    subject: str = SELF
    kind: str = SELF
    aspect: str = ""
    occasion: str = ""
    set_by: str = SET_BY_RULES

    def to_dict(self) -> dict[str, str]:
        return {
            "subject": self.subject,
            "kind": self.kind,
            "aspect": self.aspect,
            "occasion": self.occasion,
            "set_by": self.set_by,
        }

    @property
    def subject_phrase(self) -> str:
        """ "you", "your brother", "your brother Tom", "Ana", "Biscuit"."""
        return subject_phrase(self.subject, self.kind)

    def describe(self) -> str:
        """One line for the pages: "about your brother · home · 2019-05"."""
        parts = [f"about {self.subject_phrase}"]
        if self.aspect:
            parts.append(aspect_label(self.aspect))
        if self.occasion:
            parts.append(occasion_label(self.occasion))
        return " · ".join(parts)


def subject_phrase(subject: str, kind: str) -> str:
    if kind == SELF or subject == SELF:
        return "you"
    role, name = split_subject(subject)
    if role and role in ROLE_WORDS | PET_WORDS:
        return f"your {role} {name}".strip()
    return subject


def aspect_label(aspect: str) -> str:
    if aspect.startswith("the "):
        return aspect[4:]
    if aspect.startswith("preference:"):
        return f"preference ({aspect.split(':', 1)[1]})"
    return aspect.replace("-", " ")


def occasion_label(occasion: str) -> str:
    if occasion.startswith("~"):
        return f"{occasion[1:]} (when written)"
    return occasion


# --- words -----------------------------------------------------------------------

# Someone the owner names and describes without a relation ("Arjun Mehta, a
# postdoc in the lab", "Mikko from downstairs"): told apart from a relation of
# the same first name.
ACQUAINTANCE = "acquaintance"
# People the owner names by relation. Compound ones are written with hyphens.
ROLE_WORDS = frozenset(
    [
        "mother",
        "mum",
        "mom",
        "mam",
        "father",
        "dad",
        "wife",
        "husband",
        "partner",
        "spouse",
        "girlfriend",
        "boyfriend",
        "fiance",
        "fiancee",
        "son",
        "daughter",
        "sister",
        "brother",
        "sibling",
        "parents",
        "parent",
        "kids",
        "kid",
        "children",
        "child",
        "baby",
        "twins",
        "grandmother",
        "grandma",
        "granny",
        "nan",
        "nana",
        "grandfather",
        "grandpa",
        "granddad",
        "grandson",
        "granddaughter",
        "grandchildren",
        "grandkids",
        "aunt",
        "uncle",
        "cousin",
        "niece",
        "nephew",
        "stepmother",
        "stepfather",
        "stepson",
        "stepdaughter",
        "stepbrother",
        "stepsister",
        "mother-in-law",
        "father-in-law",
        "sister-in-law",
        "brother-in-law",
        "son-in-law",
        "daughter-in-law",
        "in-laws",
        "friend",
        "friends",
        "boss",
        "manager",
        "colleague",
        "colleagues",
        "coworker",
        "co-worker",
        "workmate",
        "neighbour",
        ACQUAINTANCE,
        "neighbor",
        "neighbours",
        "neighbors",
        "flatmate",
        "roommate",
        "housemate",
        "landlord",
        "landlady",
        "mentor",
        "therapist",
        "doctor",
        "gp",
        "dentist",
        "teacher",
        "tutor",
        "coach",
        "physio",
        "vet",
        "godson",
        "goddaughter",
        "godmother",
        "godfather",
        "ex",
        "ex-wife",
        "ex-husband",
        "family",
        "supervisor",
        "advisor",
        "adviser",
        "nanny",
        "babysitter",
        "carer",
        "caregiver",
        "trainer",
        "instructor",
        "pastor",
        "priest",
        "vicar",
        "bridesmaid",
        "groomsman",
        "classmate",
        "teammate",
    ]
)
# The same relation, one spelling.
ROLE_CANONICAL = {
    "mum": "mother",
    "mom": "mother",
    "mam": "mother",
    "dad": "father",
    "grandma": "grandmother",
    "granny": "grandmother",
    "nan": "grandmother",
    "nana": "grandmother",
    "grandpa": "grandfather",
    "granddad": "grandfather",
    "kids": "children",
    "kid": "children",
    "child": "children",
    "grandkids": "grandchildren",
    "fiancee": "fiance",
    "spouse": "partner",
    "co-worker": "coworker",
    "workmate": "coworker",
    "colleagues": "colleague",
    "colleague": "coworker",
    "neighbor": "neighbour",
    "neighbors": "neighbour",
    "neighbours": "neighbour",
    "roommate": "flatmate",
    "housemate": "flatmate",
    "landlady": "landlord",
    "friends": "friend",
    "parent": "parents",
}
PET_WORDS = frozenset(
    [
        "dog",
        "cat",
        "puppy",
        "kitten",
        "pup",
        "parrot",
        "rabbit",
        "bunny",
        "hamster",
        "horse",
        "pony",
        "budgie",
        "budgerigar",
        "tortoise",
        "guinea-pig",
        "goldfish",
        "gecko",
        "lizard",
        "snake",
        "ferret",
        "chickens",
        "hens",
    ]
)
ORGANISATION_HINTS = frozenset(
    [
        "company",
        "firm",
        "team",
        "club",
        "school",
        "university",
        "college",
        "bank",
        "council",
        "hospital",
        "clinic",
        "charity",
        "church",
        "band",
        "inc",
        "ltd",
        "llc",
        "gmbh",
        "plc",
        "corp",
        "group",
        "startup",
        "co-op",
        "cooperative",
        "association",
        "society",
        "union",
        "publisher",
        "agency",
        "shop",
        "restaurant",
        "bakery",
        "choir",
    ]
)
# Words that open a sentence about the owner.
SELF_OPENERS = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "me",
        "we",
        "we're",
        "we've",
        "he",
        "she",
        "he's",
        "she's",
        "they",
        "owner",
        "user",
        "the-owner",
    ]
)
POSSESSIVES = frozenset({"my", "his", "her", "their", "our", "owner's", "user's"})
DETERMINERS = frozenset({"the", "a", "an", "our", "my", "his", "her", "their", "this", "that"})
# Verbs that make a sentence's first capitalised word its subject ("Ana lives").
_NAME_VERB = re.compile(
    r"^(?:is|was|has|had|lives|lived|works|worked|moved|likes|loves|hates|prefers|eats|drinks|"
    r"plays|runs|goes|went|got|gets|will|would|can|does|did|doesn't|didn't|isn't|wasn't|"
    r"started|stopped|turned|turns|retired|studies|studied|teaches|takes|took|visited|visits|"
    r"became|becomes|bought|sold|left|joined|quit|married|divorced|graduated|speaks|owns|"
    r"drives|cycles|walks|uses|wants|needs|keeps|just|still|now|also|recently|only|always|"
    r"never|usually|often|rarely|sometimes|already|and|&)$"
)
_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ][\w'’-]*|\d[\d:./-]*")


def _words(text: str) -> list[str]:
    return [word.replace("’", "'") for word in _WORD.findall(text)]


def _first_clause(text: str) -> str:
    """Up to the first full stop, semicolon or line break (not inside "Dr." or "7.40")."""
    match = re.search(r"(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bSt)(?<!\bMrs)[.;!?\n](?!\d)", text)
    return text[: match.start()] if match else text


# --- subject ---------------------------------------------------------------------


def split_subject(subject: str) -> tuple[str, str]:
    """("brother", "Tom") of "brother Tom"; ("", "Ana Silva") of "Ana Silva"."""
    words = subject.split()
    roles: list[str] = []
    while words and words[0].lower().rstrip("'s") in ROLE_WORDS | PET_WORDS:
        roles.append(words.pop(0).lower())
    return " ".join(roles), " ".join(words)


def _role(word: str) -> str:
    word = word.lower().replace("’", "'")
    base = word.removesuffix("'s").removesuffix("'")
    if base in ROLE_WORDS:
        return ROLE_CANONICAL.get(base, base)
    return ""


def _is_name(word: str) -> bool:
    return (
        bool(word)
        and word[0].isupper()
        and not word.isupper()
        or (len(word) > 1 and word.isupper() and word.isalpha())
    )


_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DAYS = "mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?"
_TIMES = (
    "week|month|year|morning|evening|night|summer|winter|spring|autumn|weekend|time|"
    + _DAYS
    + "|"
    + _MONTHS
)
# A phrase of time or place before the subject: "In January 2026, Ana moved …",
# "After the wedding, his sister …", "Last year Tom …", "On Sundays Helen …".
_LEADING_ADVERBIAL = re.compile(
    r"^\s*(?:(?:in|on|at|after|before|since|during|until|from|by|last|next|this|every|"
    r"each|earlier|later|back|once)\b[^,]{1,60},\s*"
    rf"|(?:last|next|this|every|each)\s+(?:{_TIMES})\s+"
    rf"|(?:on|in)\s+(?:{_DAYS}|(?:{_MONTHS})(?:\s+\d{{4}})?|\d{{4}})\s+"
    # "Since the thyroid diagnosis Biscuit only eats …": no comma, but a name and
    # a verb after a phrase of lower-case words.
    r"|(?:since|after|before|during|until|following)\s+(?:the|a|an|his|her|their|its|our|my)"
    r"(?-i:(?:\s+[a-z][\w'-]*){1,4}\s+(?=[A-Z][a-z]+\s+[a-z])))",
    re.IGNORECASE,
)


def _subject_of(text: str, entities: tuple[str, ...]) -> tuple[str, str, str]:
    """(subject, kind, aspect named by the frame or "") of a memory's text.

    The aspect is set only by "my wife is Keiko" / "Ellie's best friend is
    Maisie": such a sentence says who the owner's (or Ellie's) wife or best
    friend is, so it is about the owner (or Ellie), its aspect the relation.
    """
    clause = _LEADING_ADVERBIAL.sub("", _first_clause(text.strip()), count=1)
    words = _words(clause)
    if not words:
        return SELF, SELF, ""
    lowered = [word.lower() for word in words]
    first = lowered[0]
    if first in SELF_OPENERS or first.removesuffix("'s") in {"owner", "user"}:
        return SELF, SELF, ""
    attribute = _opening_attribute(clause, entities)
    if attribute:
        return SELF, SELF, attribute
    # "Younger brother Arjun is …", "Son Matthew, 34, …": a relation opening the sentence.
    role_at = 0
    while role_at < len(words) - 1 and lowered[role_at] in _ROLE_ADJECTIVES:
        role_at += 1
    if (
        _role(words[role_at])
        and not words[role_at].endswith("'s")
        and not _compound_at(lowered, role_at)
    ):
        copula = _copula_after_phrase(lowered, role_at + 1)
        if copula is not None and _names_next(words, copula + 1):
            # "Boyfriend is Miguel Ferraz", "Manager at Loomwork is Tobi": who the
            # owner's boyfriend or manager is, the possessive left out.
            return SELF, SELF, _relation_aspect(_role(words[role_at]))
        name = _name_after(words, role_at + 1)
        if name:
            return f"{_role(words[role_at])} {name}", PERSON, ""
        following = lowered[role_at + 1] if role_at + 1 < len(lowered) else ""
        if words[role_at][0].isupper() and following and not _is_name(words[role_at + 1]):
            # "Mum started insulin", "Dad retired in May".
            return _role(words[role_at]), PERSON, ""
    if first in POSSESSIVES and len(words) > 1:
        role_at = 1
        # "my best friend", "my older brother", "my late father"
        while role_at < len(words) - 1 and lowered[role_at] in _ROLE_ADJECTIVES:
            role_at += 1
        role = "" if _compound_at(lowered, role_at) else _role(words[role_at])
        pet = lowered[role_at].removesuffix("'s") in PET_WORDS
        if role or pet:
            label = lowered[role_at].removesuffix("'s") if pet else role
            position = role_at
            # "my brother's wife": the wife is the subject.
            while (
                words[position].endswith("'s")
                and position + 1 < len(words)
                and _role(words[position + 1])
            ):
                position += 1
                label = f"{label}'s {_role(words[position])}"
            name = _name_after(words, position + 1)
            after = position + 1 + len(name.split()) if name else position + 1
            following = lowered[after] if after < len(lowered) else ""
            if (
                not name
                and words[position].endswith("'s")
                and lowered[position + 1 : position + 3] in (["name", "is"], ["name", "was"])
            ):
                # "His wife's name is Leila": who the owner's wife is.
                return SELF, SELF, _relation_aspect(label)
            copula = _copula_after_phrase(lowered, after)
            if copula is not None and _names_next(words, copula + 1) and not name:
                # "My wife is Keiko", "Her manager at Fernwood is Hannah": who
                # the owner's wife or manager is.
                return SELF, SELF, _relation_aspect(label)
            if (
                copula is not None
                and not name
                and label in CARER_ROLES
                and lowered[copula + 1 : copula + 2] in (["at"], ["in"], ["with"])
            ):
                # "Her GP is at the Hervanta health centre": where the owner's
                # doctor is, which a new practice replaces, as a new name does.
                return SELF, SELF, _relation_aspect(label)
            kind = PET if pet else PERSON
            return f"{label} {name}".strip(), kind, ""
        noun = lowered[role_at]
        if noun.endswith("'s") and len(words) > role_at + 1:
            # "My car's insurance renews": about the car, not about the owner.
            return noun.removesuffix("'s"), THING, ""
        return SELF, SELF, _named_attribute(lowered[1:])
    name = _opening_name(clause, entities)
    if name:
        position = len(name.split())
        possessive = words[position - 1].endswith("'s") if position <= len(words) else False
        following = lowered[position] if position < len(lowered) else ""
        if (
            following == "and"
            and position + 1 < len(lowered)
            and lowered[position + 1]
            in {
                "i",
                "me",
            }
        ):
            return SELF, SELF, ""
        if _names_an_organisation(name, clause):
            kind = ORGANISATION
        elif _names_a_pet(name, clause):
            kind = PET
        else:
            kind = PERSON
        if possessive:
            # "Ellie's best friend is Maisie": who Ellie's best friend is.
            match = re.match(
                rf"\s*{re.escape(name)}'s\s+(?:(?:{'|'.join(_ROLE_ADJECTIVES)})\s+)*([\w-]+)"
                r"\s+(?:is|was)\s+(?:called\s+|named\s+)?[A-Z]",
                clause.replace("’", "'"),
            )
            if match and _role(match.group(1)):
                return name, kind, _relation_aspect(_role(match.group(1)))
        position = len(name.split())
        if (
            not possessive
            and lowered[position : position + 1] in (["is"], ["was"])
            and position + 1 < len(lowered)
            and lowered[position + 1] in POSSESSIVES
        ):
            # "Jonas is his best friend": who the owner's best friend is.
            after = position + 2
            while after < len(words) - 1 and lowered[after] in _ROLE_ADJECTIVES:
                after += 1
            if after < len(words) and _role(words[after]):
                return SELF, SELF, _relation_aspect(_role(words[after]))
        appositive_role = _appositive_role(clause, name) if kind == PERSON else ""
        if appositive_role:
            return f"{appositive_role} {name}", kind, ""
        return name, kind, ""
    return SELF, SELF, ""


# A relation's word opening a noun that names no one: "Her mother tongue is …".
NOT_A_RELATION = frozenset(
    [
        "mother tongue",
        "mother language",
        "mother country",
        "mother ship",
        "father figure",
        "sister city",
        "sister company",
        "sister ship",
        "baby shower",
        "baby monitor",
        "partner organisation",
    ]
)


def _compound_at(lowered: list[str], position: int) -> bool:
    return " ".join(lowered[position : position + 2]) in NOT_A_RELATION


# Words between a possessive and a relation ("my best friend", "his late father").
_ROLE_ADJECTIVES = frozenset(
    [
        "best",
        "old",
        "older",
        "oldest",
        "younger",
        "youngest",
        "little",
        "big",
        "elder",
        "eldest",
        "late",
        "new",
        "former",
        "ex",
        "current",
        "closest",
        "dear",
        "baby",
        "twin",
    ]
)
# The aspect of a sentence saying who someone's relation is.
_RELATION_ASPECTS = {
    "wife": "partner",
    "husband": "partner",
    "partner": "partner",
    "girlfriend": "partner",
    "boyfriend": "partner",
    "fiance": "partner",
    "gp": "doctor",
    "adviser": "advisor",
    "boss": "manager",
}


def _relation_aspect(role: str) -> str:
    last = role.split("'s ")[-1]
    return _RELATION_ASPECTS.get(last, last)


def relation_aspect_of(word: str) -> str:
    """The aspect of who someone's ``word`` is ("boss": "manager"), or "" when the
    word names no relation."""
    role = _role(word)
    return _relation_aspect(role) if role else ""


# Words that open a short phrase between a relation and its "is": "my manager
# at Fernwood is", "my GP in Leeds was".
_PLACE_PREPOSITIONS = frozenset({"at", "in", "from", "on"})
# At most this many words from the preposition to the "is".
_PLACE_PHRASE_MAX_WORDS = 4


def _copula_after_phrase(lowered: list[str], position: int) -> int | None:
    """Where the "is" or "was" stands that follows ``position`` directly or after
    a short place phrase ("at Fernwood", "in the Leeds office"), or None."""
    if lowered[position : position + 1] in (["is"], ["was"]):
        return position
    if lowered[position : position + 1] and lowered[position] in _PLACE_PREPOSITIONS:
        for offset in range(2, _PLACE_PHRASE_MAX_WORDS + 1):
            if lowered[position + offset : position + offset + 1] in (["is"], ["was"]):
                return position + offset
    return None


def _names_next(words: list[str], position: int) -> bool:
    while position < len(words) and words[position].lower() in {"called", "named", "dr", "mr"}:
        position += 1
    return position < len(words) and _is_name(words[position])


# Up to three plain words, then "is": "Phone is", "Mobile plan was" (not "Keiko,
# my wife, is", where the words before "is" hold a name and its apposition).
_OPENING_PHRASE = re.compile(r"^\s*([A-Za-z]+(?: [a-z]+){0,2}) (?:is|was)\b")


def _opening_attribute(clause: str, entities: tuple[str, ...]) -> str:
    """ "Phone is a Samsung Galaxy S21", "Family car is a Zafira": an attribute of
    the owner's, the possessive left out, named by a phrase the aspect cues know
    (a name before "is" names no aspect: "Ana is a nurse"; a relation is a
    person: "Wife is a teacher")."""
    opening = _OPENING_PHRASE.match(clause)
    if not opening:
        return ""
    phrase = opening.group(1).lower().split()
    if (
        set(phrase) & POSSESSIVES
        or _role(phrase[-1])
        or any(" ".join(phrase) in entity.lower() for entity in entities)
    ):
        return ""
    attribute = _named_attribute([word.lower() for word in _words(clause)])
    return attribute if attribute and not attribute.startswith("the ") else ""


def _named_attribute(words: list[str]) -> str:
    """ "his accountant is Rui" -> "the accountant": a possessive noun phrase with
    a singular copula names one attribute with one value at a time."""
    for position, word in enumerate(words[:6]):
        if word in {"is", "was"} and position > 0:
            phrase = [w for w in words[:position] if w not in _ROLE_ADJECTIVES]
            if not phrase or not all(w.isalpha() or "-" in w for w in phrase):
                return ""
            if phrase[0] in {"favourite", "favorite", "preferred", "go-to"} and len(phrase) > 1:
                # "His favourite meal is …": the preference "Favourite meal is …" names.
                return f"preference:{phrase[-1]}"
            named = " ".join(phrase)
            # "His birthday is …", "His car is …": an aspect the cues know by name.
            known = _aspect_of(named, "semantic")
            if known and not is_multi_valued(known):
                return known
            return "the " + named[: MAX_ASPECT_CHARS - 4]
        if word in {"are", "were", "has", "have"}:
            return ""
    return ""


def _opening_name(clause: str, entities: tuple[str, ...] = ()) -> str:
    """The name a sentence opens with ("Ana", "Ana Costa", "Ellie's"), if any,
    by the store's proper-noun rules (memories/proper_nouns.py): a capitalised
    verb opening a sentence ("Visited Arjun", "Has moved") is not a name."""
    stripped = clause.lstrip(" \"'“(")
    words = _words(stripped)
    if not words or not _is_name(words[0]) or words[0].lower() in _OPENING_WORDS:
        return ""
    if words[0].lower().endswith("ly") and len(words[0]) > 4:
        return ""  # "Really dislikes", "Usually takes"
    first = words[0].removesuffix("'s")
    for entity in entities:
        # "Finn broke his wrist": a name the memory's entities hold.
        if entity.split()[0] == first and not _looks_like_a_verb_form(first):
            named = " ".join(stripped.split()[: len(entity.split())]).rstrip(",.;:")
            return entity if named.removesuffix("'s") == entity else first
    for span in proper_noun_spans(stripped):
        if stripped.startswith(span):
            parts = span.split()
            if len(parts) > 1 and _looks_like_a_verb_form(parts[0]):
                # "Uses Python 3", "Prefers Folgers", "Farms 640 acres": a verb
                # opening a sentence about the owner, then what it names.
                return ""
            return span
    # "Ana, my sister-in-law, eats meat", "Toby was": a lone name the rules
    # above leave out when nothing but its sentence's verb or an apposition follows.
    following = words[1].lower() if len(words) > 1 else ""
    if _NAME_VERB.match(words[0].lower()):
        return ""  # "Has moved", "Is now": a verb, not a name
    if _NAME_VERB.match(following) or (
        not _looks_like_a_verb_form(words[0])
        and (_appositive_role(stripped, words[0]) or _names_a_pet(words[0], stripped))
    ):
        return words[0].removesuffix("'s")
    return ""


def _looks_like_a_verb_form(word: str) -> bool:
    lowered = word.lower()
    return (
        lowered.endswith(("ed", "ing"))
        or lowered.endswith("s")
        and not lowered.endswith(("ss", "us", "is"))
        and len(lowered) > 3
        or lowered in IRREGULAR_VERB_FORMS
    )


# English verbs whose past (or base) form no suffix gives away: "Threw Gareth a
# surprise party", "Quit Los Cerros Sonoros", "Met Ana at the gym" open with a
# verb about the owner, not with a name.
IRREGULAR_VERB_FORMS = frozenset(
    [
        "ate",
        "became",
        "began",
        "bought",
        "brought",
        "built",
        "caught",
        "chose",
        "came",
        "drank",
        "drove",
        "fell",
        "felt",
        "flew",
        "forgot",
        "found",
        "gave",
        "got",
        "grew",
        "heard",
        "held",
        "hid",
        "hit",
        "hurt",
        "kept",
        "knew",
        "lay",
        "led",
        "left",
        "lent",
        "lost",
        "made",
        "meant",
        "met",
        "paid",
        "put",
        "quit",
        "ran",
        "rang",
        "read",
        "rode",
        "rose",
        "sang",
        "sat",
        "saw",
        "said",
        "sent",
        "set",
        "shook",
        "shot",
        "shut",
        "sold",
        "slept",
        "spent",
        "split",
        "spoke",
        "stole",
        "stood",
        "struck",
        "swam",
        "swore",
        "taught",
        "thought",
        "threw",
        "told",
        "took",
        "tore",
        "understood",
        "woke",
        "won",
        "wore",
        "wrote",
    ]
)


_OPENING_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "there",
        "here",
        "when",
        "after",
        "before",
        "since",
        "on",
        "in",
        "at",
        "for",
        "from",
        "to",
        "with",
        "by",
        "during",
        "every",
        "each",
        "last",
        "next",
        "yesterday",
        "today",
        "tomorrow",
        "usually",
        "always",
        "never",
        "often",
        "sometimes",
        "once",
        "twice",
        "also",
        "both",
        "all",
        "some",
        "no",
        "not",
        "yes",
        "dr",
        "mr",
        "mrs",
        "ms",
        "now",
        "currently",
        "recently",
        "still",
        "just",
        "then",
        "soon",
        "later",
        "again",
        "nowadays",
        "someone",
        "somebody",
        "everyone",
        "everybody",
        "nobody",
        "anyone",
        "anybody",
    ]
)


def _name_after(words: list[str], position: int) -> str:
    """A name right after a relation ("my sister Ana", "my brother, Tom,")."""
    name: list[str] = []
    while position < len(words) and _is_name(words[position]):
        if _NAME_VERB.match(words[position].lower()):
            break
        name.append(words[position].removesuffix("'s"))
        position += 1
    return " ".join(name)


def _appositive_role(clause: str, name: str) -> str:
    """ "Ana, my sister-in-law," / "Ana (coworker)" / "Ana from work" -> the role."""
    after = clause[clause.find(name) + len(name) :] if name in clause else ""
    match = re.match(
        r"\s*(?:,|\(|-)\s*(?:my|his|her|their|our|the owner's|the|a|an)?\s*"
        r"([\w-]+)(?:\s+([\w-]+))?",
        after,
    )
    if match:
        for word in match.groups():
            if word and _role(word):
                return _role(word)
        if re.match(r"\s*,\s*(?:a|an|the)\s", after):
            # "Arjun Mehta, a postdoc in the lab": someone described, not a relation.
            return ACQUAINTANCE
    match = re.match(r"\s+(?:from|at)\s+(work|the office|school|church|the gym|uni)\b", after)
    if match:
        return {"work": "coworker", "the office": "coworker"}.get(match.group(1), "")
    # "Mikko from downstairs", "Benja from the band", "Leena, who chairs the
    # allotment association,": a name told apart by where the owner knows them
    # from or what they do, not by a relation ("Leena, who is her sister," is
    # the sister).
    if re.match(r"\s+from\s+(?:the\s+|next\s+)?[a-z]", after):
        return ACQUAINTANCE
    relative = re.match(r"\s*,\s*who\s+([^,.;]+)", after)
    if relative:
        roles = [_role(word) for word in _words(relative.group(1)) if _role(word)]
        return roles[0] if roles else ACQUAINTANCE
    return ""


def _names_a_pet(name: str, clause: str) -> bool:
    """ "Kaisla is a blue budgie", "Kaisla, her budgerigar, …": a name said to be a pet."""
    match = re.match(
        rf"\s*{re.escape(name)},? (?:is |was )?(?:a|an|her|his|their|my|our|the) "
        r"((?:[\w-]+ ){0,2}[\w-]+)",
        clause.replace("’", "'"),
    )
    return bool(match) and any(
        word.lower().removesuffix("s") in PET_WORDS for word in match.group(1).split()
    )


def _names_an_organisation(name: str, clause: str) -> bool:
    """ "Heartland Co-op", "Argo is a publisher in Prague", "Loomwork, a B2B
    software company": a name that says, or is said to be, an organisation."""
    words = {word.lower() for word in name.split()}
    if words & ORGANISATION_HINTS:
        return True
    described = re.match(
        rf"\s*{re.escape(name)},? (?:is |was )?(?:a|an|the) ((?:[\w'-]+ ){{0,3}}[\w'-]+)",
        clause.replace("’", "'"),
    )
    if not described:
        return False
    # The head noun says what: "a friend from the choir", "the choir director"
    # are people; "a B2B scheduling software company" is not.
    noun_phrase = re.split(r" (?:from|at|in|of|with|for|on|who|that)\b", described.group(1))[0]
    return noun_phrase.split()[-1].lower().removesuffix("s") in ORGANISATION_HINTS


class KnownSubjects:
    """Whom the owner's store already names, and how: what a memory that names
    someone by one half ("Akosua", "my mother") means by the other half.

    Learnt from the ``(subject, kind)`` of the owner's memories: a first name
    the store gives one relation ("Akosua" -> "mother", from "Her mother
    Akosua lives with her"), a relation it names one person by ("mother" ->
    "Akosua"), a name it knows for a pet or an organisation ("Kaisla" -> pet).
    A name given two relations, or a relation two names, says nothing (two
    sons: "my son" names neither).
    """

    def __init__(self, subjects: Iterable[tuple[str, str]] = ()) -> None:
        self._roles: dict[str, set[str]] = {}
        self._names: dict[str, set[str]] = {}
        self._kinds: dict[str, set[str]] = {}
        self._owner_names: list[str] = []
        for subject, kind in subjects:
            self.learn(subject, kind)

    def learn_memory(self, about: About, content: str) -> None:
        """What one memory of the store says: whom it is about and, about the
        owner, the names it gives them."""
        self.learn(about.subject, about.kind)
        if about.kind == SELF:
            self.learn_owner_names(content)

    def learn_owner_names(self, content: str) -> None:
        """The names a memory about the owner gives them ("My name is Gerry")."""
        for name in owner_names_in(content):
            if name not in self._owner_names:
                self._owner_names.append(name)

    def is_owner(self, name: str) -> bool:
        return is_the_owner(name, tuple(self._owner_names))

    def learn(self, subject: str, kind: str) -> None:
        if kind not in (PERSON, PET, ORGANISATION) or not subject:
            return
        role, name = split_subject(subject)
        if kind in (PET, ORGANISATION) and name:
            self._kinds.setdefault(name.casefold(), set()).add(kind)
        if role and name and role != ACQUAINTANCE and "'s" not in role:
            self._roles.setdefault(name.split()[0].casefold(), set()).add(role)
            self._names.setdefault(role, set()).add(name)

    def role_of(self, first_name: str) -> str:
        return _only(self._roles.get(first_name.casefold()))

    def name_of(self, role: str) -> str:
        return _only(self._names.get(role))

    def kind_of(self, name: str) -> str:
        return _only(self._kinds.get(name.casefold()))

    def __bool__(self) -> bool:
        return bool(self._roles or self._kinds or self._owner_names)


# "My name is Gerry", "Goes by Gerry", "Owner is Gerald "Gerry" Whitlock": the
# names a memory about the owner gives them (a nickname in quotes apart).
# The aspects of a memory about the owner's name ("Goes by Gerry": name; "My
# name is Gerry": the name); the store reads at most MAX_OWNER_NAME_MEMORIES
# of them for the names the owner goes by.
NAME_ASPECTS = ("name", "the name")
MAX_OWNER_NAME_MEMORIES = 20
_OWNER_NAMED = re.compile(
    # Whose name: the owner's ("My name is", "Her full name is"), not "The dog's name is".
    r"(?i:(?:^|\b(?:my|her|his|owner's)\s+)(?:(?:first|full|real|given)\s+)?name is|"
    r"\bgoes by|\bknown as|\bowner is)\s+"
    r"((?:[A-Z][\w'’-]+|[\"“][^\"”]+[\"”])(?:\s+(?:[A-Z][\w'’-]+|[\"“][^\"”]+[\"”]))*)"
)
_QUOTED = re.compile(r"[\"“]([^\"”]+)[\"”]")


def owner_names_in(content: str) -> tuple[str, ...]:
    """The names a memory says the owner goes by: "Owner is Gerald "Gerry"
    Whitlock" gives "Gerald Whitlock" and "Gerry"."""
    names: list[str] = []
    for match in _OWNER_NAMED.finditer(content):
        phrase = match.group(1)
        full = " ".join(_QUOTED.sub(" ", phrase).split())
        names += [full] if full else []
        names += [" ".join(nickname.split()) for nickname in _QUOTED.findall(phrase)]
    return tuple(dict.fromkeys(name for name in names if name))


def _only(found: set[str] | None) -> str:
    return next(iter(found)) if found and len(found) == 1 else ""


def with_known_subject(
    about: About, known: KnownSubjects | Callable[[About], KnownSubjects] | None
) -> About:
    """``about`` with the half of its subject the store already knows: "Akosua"
    as "mother Akosua", "my mother" as "mother Akosua", "Pivo" as a pet. An
    about the owner set, or one about the owner, is left as it is. ``known``
    may be a function that reads what the store knows of this about's
    subject: called only for a bare name or a bare relation, which most
    memories (about the owner) are not."""
    if known is None or about.set_by == SET_BY_OWNER or about.kind not in (PERSON, PET):
        return about
    role, name = split_subject(about.subject)
    if bool(role) == bool(name):
        return about
    if callable(known):
        known = known(about)
    if not known:
        return about
    if name and not role:
        if known.is_owner(name):
            # "Gerry keeps a spare in the caravan", in a store that says "My name is Gerry".
            return replace(about, subject=SELF, kind=SELF)
        kind = known.kind_of(name)
        if kind:
            return replace(about, kind=kind)
        known_role = known.role_of(name.split()[0])
        full = known.name_of(known_role) if known_role else ""
        # "Linda Vos" is not "wife Linda": a full name must be the one known.
        if known_role and (len(name.split()) == 1 or name.casefold() == full.casefold()):
            fuller = full if full.casefold().startswith(name.casefold()) else name
            return replace(about, subject=f"{known_role} {fuller}"[:MAX_SUBJECT_CHARS])
    if role and not name:
        full = known.name_of(role)
        if full:
            return replace(about, subject=f"{role} {full}"[:MAX_SUBJECT_CHARS])
    return about


def same_subject(first: About, second: About) -> bool:
    """Whether two abouts name the same subject.

    "brother Tom" and "brother" are one person, "Tom" and "brother Tom" too;
    "coworker Ana" and "sister-in-law Ana", or "Ana Silva" and "Ana Costa", are two.
    """
    if first.kind == SELF or second.kind == SELF:
        return first.kind == second.kind
    if first.subject.casefold() == second.subject.casefold():
        return True
    first_role, first_name = split_subject(first.subject.casefold())
    second_role, second_name = split_subject(second.subject.casefold())
    if first_role and second_role and first_role != second_role:
        return False
    if _full_name_against_relation((first_role, first_name), (second_role, second_name)):
        return False
    if first_name and second_name:
        first_parts, second_parts = first_name.split(), second_name.split()
        if first_parts[0] != second_parts[0]:
            return False
        # "Ana" and "Ana Silva" may be one person; "Ana Silva" and "Ana Costa" are not.
        return len(first_parts) == 1 or len(second_parts) == 1 or first_parts == second_parts
    # One side has only a role, the other a name: one person when the roles agree.
    return bool(first_role and first_role == second_role)


def _full_name_against_relation(first: tuple[str, str], second: tuple[str, str]) -> bool:
    """ "brother Arjun" against "Arjun Mehta": a relation the owner names by first
    name, and someone named in full with no relation: taken for two people."""
    (first_role, first_name), (second_role, second_name) = first, second
    if ACQUAINTANCE in (first_role, second_role):
        # "Wei Zhang from the chemistry department" is Wei Zhang: no relation.
        return False
    return bool(
        first_role
        and not second_role
        and len(second_name.split()) > 1
        or second_role
        and not first_role
        and len(first_name.split()) > 1
    )


# --- aspect ----------------------------------------------------------------------


# (aspect, pattern), most specific first: the first that matches wins. Patterns
# are matched against the lower-cased text with "’" read as "'".
def _plural(word: str) -> str:
    if word.endswith("s"):
        return word
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


# A pet named by any of PET_WORDS ("a pup called Moss"), or "pet" itself.
_PET_PATTERN = (
    r"\b(?:"
    + "|".join(
        re.escape(form)
        for word in sorted(PET_WORDS | {"pet"}, key=len, reverse=True)
        for form in dict.fromkeys((_plural(word), word))
    )
    + r")\b"
)

JOB_TITLES = (
    r"(?:nurse|teacher|engineer|designer|developer|doctor|lawyer|accountant|translator|farmer|"
    r"student|manager|architect|chef|consultant|writer|journalist|researcher|scientist|"
    r"pharmacist|electrician|plumber|carpenter|mechanic|programmer|analyst|professor|"
    r"lecturer|paramedic|midwife|vet|therapist|librarian|baker|artist|photographer|dentist|"
    r"editor|postdoc|surgeon|pilot|driver|cleaner|receptionist|ceramicist|potter|"
    r"solicitor|barrister|civil servant|police officer|firefighter|soldier|officer)"
)

# A grandparent, by any name ("making Gerry a grandad").
GRANDPARENT_WORDS = (
    r"(?:grandad|granddad|grandpa|grandfather|grandmother|grandma|granny|grandparents?|nan|nana)\b"
)

ASPECT_PATTERNS: tuple[tuple[str, str], ...] = (
    # "Owner is Gerald Whitlock, born in Glasgow": the name first, whatever follows.
    ("name", r"\bname is\b|\bgoes by\b|\bknown as\b|^owner is\b|\bnickname\b|\bpronouns?\b"),
    (
        # "Has two grandchildren", "Is a grandfather", "… was born, making Gerry
        # a grandad for the third time": how many grandchildren, before what a
        # birth or a child would say.
        "grandchildren",
        r"\b(?:has|have|had)\s+(?:\w+\s+)?grand(?:children|kids|sons?|daughters?|child)\b|"
        r"\b(?:is|was|became|become|becoming|making|made|makes)(?:\s+\w+)?(?:\s+now)?\s+an?\s+"
        r"(?:\w+\s+)?" + GRANDPARENT_WORDS + r"|"
        r"\b(?:first|second|third|fourth|fifth|new|another)\s+grand(?:child|son|daughter|baby)\b|"
        r"\bgrandchildren\b",
    ),
    (
        "commute",
        r"\bcommut\w*|\b(?:cycl\w*|bik\w*|driv\w*|walk\w*|rides?|takes? the \w+(?: \w+)?|"
        r"trains?|bus|tram|ferry|metro|tube|subway|scooter)\b[^.;]{0,30}\b(?:in)?to (?:work|the "
        r"office|the hospital|the surgery|school|campus|the lab)\b|\bway to work\b",
    ),
    (
        "work-schedule",
        r"\bworks? (?:from home|remotely|part[- ]time|full[- ]time|nights?|shifts?|weekends?|"
        r"(?:\w+ )?days? a week|mondays|tuesdays|wednesdays|thursdays|fridays|compressed)|"
        r"\boffice days?\b|\b(?:night|day|early|late|long) shifts?\b|\bdays? in the office\b|"
        # "Goes into the Fernwood office three days a week".
        r"\boffice\b[^.;]{0,25}\b(?:days? a week|(?:once|twice) a week)\b|"
        r"\b(?:days? a week|(?:once|twice) a week)\b[^.;]{0,25}"
        r"\b(?:in(?:to)?|at) the (?:\w+ )?office\b|"
        r"\bhybrid (?:work|working|schedule)\b|\bfour[- ]day week\b|\bworking hours\b|"
        r"\brota\b|\bon call\b|\bwfh\b|\b(?:my|his|her|their) shifts?\b",
    ),
    ("allergy", r"\ballerg\w*|\bintoleran\w*|\banaphyla\w*|\bepipen\b"),
    (
        "medication",
        r"\bmedicat\w*|\bprescri\w*|\b(?:mg|pills?|inhaler|insulin|statins?|dose)\b|"
        r"(?<!on her )(?<!on his )(?<!on my )(?<!on the )(?<!on a )\btablets?\b|"
        r"\b\w{3,}(?:olol|pril|sartan|statin|formin|azole|cillin|oxetine|pram|zepam|prazole|"
        r"thyroxine|levothyroxine)\b",
    ),
    (
        "diet",
        r"\bvegetarian\b|\bvegan\b|\bpescatarian\b|\bgluten\b|\bdairy[- ]free\b|\blactose\b|"
        r"\bketo\b|\bdiet\b|\bdoes(?:n't| not) eat\b|\bno longer eats\b|\bstopped eating\b|"
        r"\bhalal\b|\bkosher\b|\beats? (?:no|meat|fish)\b|\bplant[- ]based\b",
    ),
    (
        "health",
        r"\bdiagnos\w*|\bcondition\b|\bdiabet\w*|\basthma\w*|\barthritis\b|\bblood pressure\b|"
        r"\bhypertension\b|\bmigraines?\b|\binjur\w*|\bsurgery\b|\boperation\b|\bback pain\b|"
        r"\bcancer\b|\bdepress\w*|\banxiety\b|\bpregnan\w*|\bphysio\w*|\billness\b|"
        r"\bcholesterol\b|\bbroken? (?:his|her|my|an?|the) \w+|\btinnitus\b|\beczema\b|"
        r"\bhearing\b|\beyesight\b|\bglasses\b|\bcontact lenses\b|\bknee\b|\bhip\b|\bthyroid\b|"
        r"\badhd\b|\bautis\w*|\bdyslex\w*|\binsomnia\b|\bsleep apnoea\b|\bcoeliac\b|\bceliac\b|"
        r"\bblood sugar\b|\ba1c\b|\bsighted\b|\bhearing aid\b|\bnause\w*|\bcarsick\b|\bsick\b",
    ),
    ("birthday", r"\bbirthday\b|\bborn on\b|\bdate of birth\b|\bbday\b"),
    ("body", r"\bweighs?\b|\bweight\b|\bkg\b|\bkilos?\b|\bheight\b|\b\d+ ?cm tall\b|\bshoe size\b"),
    (
        "age",
        r"\b(?:\d+|\w+-?\w*) years? old\b|\baged? \d+|\bturn(?:s|ed)? (?:\d+|twenty|thirty|"
        r"forty|fifty|sixty|seventy|eighty|ninety)\b|\bis (?:\d{1,2}|one|two|three|four|five|six|"
        r"seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|"
        r"eighteen|nineteen)(?:[.,;!]?$| years)",
    ),
    (
        "partner",
        r"\bmarri\w*|\bwife\b|\bhusband\b|\bpartner\b|\bgirlfriend\b|\bboyfriend\b|\bfianc\w*|"
        r"\bengaged\b|\bdivorc\w*|\bseparated\b|\bdating\b|\bspouse\b|\bsingle\b|\bwidow\w*",
    ),
    (
        "children",
        r"\b(?:has|have|had) (?:\w+ )?(?:kids|children|sons?|daughters?|a baby|twins)\b|"
        r"\bexpecting (?:a baby|twins)\b",
    ),
    (
        "language",
        r"\b(?:speaks?|spoke|learning|learns?|studying|lessons? in|fluent in|native|classes in)"
        r" [^.;]{0,20}\b(?:english|spanish|french|german|portuguese|italian|japanese|mandarin|"
        r"chinese|cantonese|arabic|dutch|russian|korean|hindi|polish|greek|swedish|welsh|irish|"
        r"turkish|urdu|bengali|punjabi|tagalog|swahili|hebrew|norwegian|danish|finnish|czech|"
        r"vietnamese|thai|indonesian|maori|te reo|sign language|bsl|asl)\b|\bduolingo\b|"
        r"\bbilingual\b|\bfluent\b|\bnative (?:language|speaker)\b",
    ),
    ("seat", r"\b(?:aisle|window|middle|exit[- ]row) seats?\b|\bseats?\b"),
    (
        "subscription",
        r"\bsubscri\w*|\bmembership\b|\b(?:phone|mobile|data|monthly|annual|broadband|streaming)"
        r" (?:plan|contract|bill)\b|\bcontract\b|\btariff\b|\binsurance\b",
    ),
    (
        "phone",
        r"\bphone\b|\biphone\b|\bandroid\b|\bpixel \d|\bgalaxy\b|\bsmartphone\b|\bmobile\b|"
        r"\bfairphone\b",
    ),
    (
        "computer",
        r"\blaptop\b|\bcomputer\b|\bmacbook\b|\bthinkpad\b|\bdesktop\b|\b(?:gaming )?pc\b|"
        r"\bchromebook\b|\bipad\b|\btablet\b",
    ),
    (
        "car",
        r"\bcar\b|\bdrives? an? \w+|\bvehicle\b|\bvan\b|\bmotorbike\b|\bmotorcycle\b|\bsuv\b|"
        r"\bhatchback\b|\bdriving licen[cs]e\b|\bev\b|\belectric car\b|"
        # "Bought a used 2021 grey Dacia Duster": a make after a verb of owning.
        r"\b(?:drives?|drove|driving|bought|buys|sold|sells|leases?|leased|owns|picked up|"
        r"traded in|swapped|test[- ]drove)\b[^.;]{0,40}\b(?:toyota|honda|ford|vauxhall|opel|"
        r"volkswagen|vw|renault|dacia|kia|hyundai|nissan|peugeot|citro[eë]n|fiat|[sš]koda|"
        r"audi|bmw|mercedes|volvo|mazda|subaru|suzuki|tesla|jeep|land rover|range rover|lexus|"
        r"chevrolet|polestar|cupra|byd|mitsubishi|jaguar|porsche|alfa romeo)\b",
    ),
    ("contact", r"\be-?mail\b|\bphone number\b|\bnumber is\b|\S+@\S+|\bhandle\b|\bmobile number\b"),
    (
        "appointment",
        r"\bappointment\b|\bcheck-?up\b|\bcheckup\b|\bdentist\b|\bdoctor'?s\b|\bgp\b|"
        r"\bscan\b|\bx-ray\b|\bvaccin\w*|\bjab\b|\bbooked in\b|\bhaircut\b|\bmot\b|\bservic\w*",
    ),
    (
        "travel",
        r"\btrips?\b|\btravel\w*|\bflew\b|\bflights?\b|\bfly(?:ing)? to\b|\bholiday\b|"
        r"\bvacation\b|\bvisit(?:ed|ing)? \w+|\bvisits? to\b|\babroad\b|\bairport\b|\bcruise\b|"
        r"\bweekend (?:in|away)\b|\bgetaway\b|\bbackpack\w*|\bitinerar\w*|\bjourney\b|"
        r"\bpassport\b|\bhotel\b|\bcamping\b|\broad trip\b|\bhoneymoon\b",
    ),
    (
        "job",
        r"\bworks?(?:ing)? (?:at|for|as|in|with)\b|\bworked (?:at|for|as)\b|\bjobs?\b|"
        r"\bemploy\w*|\bhired\b|\bpromot\w*|\bretir\w*|\bcareer\b|\bprofession\w*|"
        r"\bposition\b|\brole\b|\bquit\b|\bresign\w*|\bfreelanc\w*|\bself-employed\b|"
        r"\bredundan\w*|\blaid off\b|\bstarted at\b|\binterview\w*|\bsalary\b|\bpay rise\b|"
        r"\bearns?\b|\bwages?\b|"
        r"\bfirst (?:day|shift|week) (?:at|with|as)\b(?! (?:the )?(?:school|university|college|"
        r"nursery|uni|kindergarten)\b)|"
        r"\bworkplace\b|\bcontract at\b|\bclients?\b|\bnew boss\b|"
        r"\bis an? (?:\w+ )?" + JOB_TITLES + r"\b|"
        # "Train driver for Northern, based at …": a title opening the sentence.
        r"^(?:[\w-]+ ){0,2}" + JOB_TITLES + r" (?:for|at|with)\b",
    ),
    (
        "home",
        r"\blives\b|\blived\b|\b(?:i|we|they) live\b|\bliving (?:in|at|with|on)\b|"
        r"\blive (?:in|at|with|on|now)\b|"
        r"\bmoved (?:to|into|house|in|out|back)\b|"
        r"\bmoving (?:to|house|out)\b|\brelocat\w*|\baddress\b|\bflat\b|\bapartment\b|\brents?\b|"
        r"\bmortgage\b|\bresides?\b|\bbased in\b|\bhome (?:is|town)\b|\bhouse (?:in|on)\b|"
        r"\bbought a (?:house|flat|home)\b|\bneighbourhood\b|\bpostcode\b|\bzip code\b",
    ),
    (
        "hometown",
        r"\bgrew up\b|\bborn (?:in|at|and raised)\b|\bis from\b|\boriginally from\b|\bhometown\b|"
        r"\bcomes from\b|\bchildhood\b",
    ),
    (
        "education",
        r"\bstud(?:y|ies|ied|ying|ent)\b|\bdegree\b|\buniversity\b|\bcollege\b|\bschool\b|"
        r"\bcourse\b|\bphd\b|\bmaster'?s\b|\bgraduat\w*|\bexams?\b|\bdissertation\b|\bthesis\b|"
        r"\bdiploma\b|\bqualification\b|\bmodule\b|\bsemester\b|\bapprenticeship\b|"
        r"\byear \d{1,2}\b|\b\d+(?:st|nd|rd|th) grade\b|\bgrade \d+\b|\bkindergarten\b|\bnursery\b",
    ),
    (
        "sport",
        r"\bfootball\b|\bsoccer\b|\btennis\b|\bgolf\b|\bcricket\b|\brugby\b|\bbasketball\b|"
        r"\bbaseball\b|\bhockey\b|\bnetball\b|\bvolleyball\b|\bbadminton\b|\bsquash\b|"
        r"\bsupports? \w+|\bfan of\b|\bseason ticket\b|\bleague\b|\bmatch(?:es)?\b",
    ),
    (
        "fitness",
        r"\bruns?\b|\brunning\b|\bran\b|\bjog\w*|\bgym\b|\byoga\b|\bpilates\b|\bswim\w*|"
        r"\bmarathon\b|\b\d+k\b|\bparkrun\b|\bworkouts?\b|\bexercis\w*|\bweights\b|\bcrossfit\b|"
        r"\bclimb\w*|\bbouldering\b|\bsteps\b|\bspin class\b|\btriathlon\b|\bcycling\b|"
        r"\brides? (?:his|her|a) bike\b|\bfitness\b|\bpersonal best\b|\bpb\b",
    ),
    (
        "music",
        r"\bmusic\b|\bband\b|\bguitar\b|\bpiano\b|\bviolin\b|\bcello\b|\bdrums\b|\bsings?\b|"
        r"\bsinging\b|\bchoir\b|\bconcerts?\b|\bgigs?\b|\balbums?\b|\blistens? to\b|"
        r"\bplaylist\b|\bopera\b|\bjazz\b|\bsongs?\b|\bvinyl\b|\bfestival\b",
    ),
    (
        "reading",
        r"\breads?\b|\breading\b|\bbooks?\b|\bnovels?\b|\bauthor\b|\bbook club\b|\bkindle\b|"
        r"\bpoetry\b|\baudiobooks?\b|\blibrary\b",
    ),
    (
        "tv-film",
        r"\bwatch(?:es|ed|ing)?\b|\bfilms?\b|\bmovies?\b|\bseries\b|\btv\b|\bnetflix\b|"
        r"\bshows?\b|\bcinema\b|\bdocumentar\w*|\banime\b|\bpodcasts?\b",
    ),
    ("pet", _PET_PATTERN),
    (
        "drink",
        r"\bcoffee\b|\btea\b|\bespresso\b|\blatte\b|\bcappuccino\b|\bflat white\b|\bbeer\b|"
        r"\bwine\b|\bwhisk(?:e)?y\b|\bgin\b|\bcocktails?\b|\balcohol\b|\bdrinks?\b|\bmatcha\b|"
        r"\bsmoothie\b|\bjuice\b|\boat milk\b|\bdecaf\b|\bteetotal\w*|\bsober\b|\bsugars?\b",
    ),
    (
        "food",
        r"\bfood\b|\bcuisine\b|\brestaurants?\b|\bcooks?\b|\bcooking\b|\brecipes?\b|\beats?\b|"
        r"\bdish\b|\bsushi\b|\bpizza\b|\bcurry\b|\bpasta\b|\bchocolate\b|\bcake\b|\bspicy\b|"
        r"\bbreakfast\b|\blunch\b|\bdinner\b|\bsnacks?\b|\bbakes?\b|\bbaking\b|\bfavourite dish\b",
    ),
    (
        "hobby",
        r"\bhobb\w*|\bknit\w*|\bcrochet\w*|\bpaint\w*|\bpottery\b|\bgarden\w*|\bphotograph\w*|"
        r"\bchess\b|\bfishing\b|\bwoodwork\w*|\bbirdwatch\w*|\bbeekeep\w*|\bbees\b|\bhives?\b|"
        r"\bsew\w*|\bquilt\w*|\bcalligraph\w*|\bboard games?\b|\bvideo games?\b|\bgaming\b|"
        r"\bhik\w*|\bwalks?\b|\bdrawing\b|\bsketch\w*|\bcrafts?\b|\bvolunteer\w*|\bpuzzles?\b|"
        r"\bcrossword\w*|\ballotment\b",
    ),
    (
        "finance",
        r"\bbank\b|\bsavings?\b|\bpension\b|\bbudget\w*|\bloan\b|\bdebt\b|\binvest\w*|\bisa\b|"
        r"\bcredit card\b|\binsurance\b|\btax\b|\baccountant\b",
    ),
    ("sleep", r"\bsleeps?\b|\bbedtime\b|\bwakes? up\b|\bnaps?\b|\bbed by\b|\bgoes to bed\b"),
    (
        "religion",
        r"\bchurch\b|\bmosque\b|\bsynagogue\b|\btemple\b|\bpray\w*|\breligio\w*|\bfaith\b",
    ),
    ("politics", r"\bvotes?\b|\bvoted\b|\bpolitic\w*|\bparty member\b|\belection\b"),
    (
        "plans",
        r"\bplans? to\b|\bplanning\b|\bwants to\b|\bhopes? to\b|\bintends? to\b|\bthinking of\b|"
        r"\bconsidering\b|\bsaving (?:up )?for\b|\bdreams? of\b|\bbucket list\b|\bgoal\b",
    ),
    (
        "routine",
        r"\bevery (?:morning|evening|night|day|week|weekend|monday|tuesday|wednesday|thursday|"
        r"friday|saturday|sunday)\b|\broutine\b|\busually\b|\bon (?:mondays|tuesdays|wednesdays|"
        r"thursdays|fridays|saturdays|sundays|weekends)\b|\bdaily\b|\bweekly\b",
    ),
)
# Weak cues, read only where no pattern above names an aspect: a sum "a month"
# is a subscription unless it is rent, a salary or a mortgage.
WEAK_ASPECT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("subscription", r"\bper month\b|\ba month\b|/month\b"),
)
_COMPILED_ASPECTS = tuple(
    (aspect, re.compile(pattern)) for aspect, pattern in ASPECT_PATTERNS + WEAK_ASPECT_PATTERNS
)
ASPECTS = tuple(dict.fromkeys(aspect for aspect, _ in ASPECT_PATTERNS))

# Aspects of which a subject has several values at once: a different object is
# another fact, not a new version (two allergies, two hobbies, two trips).
MULTI_VALUED = frozenset(
    [
        "allergy",
        "medication",
        "health",
        "language",
        "subscription",
        "contact",
        "appointment",
        "travel",
        "sport",
        "fitness",
        "music",
        "reading",
        "tv-film",
        "pet",
        "drink",
        "food",
        "hobby",
        "finance",
        "plans",
        "routine",
        "children",
        "religion",
        "politics",
        "event",
    ]
)
# Preferences that name one choice ("prefers", "favourite") are single-valued:
# "Prefers an aisle seat" is replaced by "Prefers a window seat"; "Likes sushi"
# and "Likes ramen" are two likings.
_SINGLE_CHOICE = re.compile(
    r"\bprefer\w*|\bfavou?rite\b|\brather\b|\bswitched\b|\bgoes for\b|\busually (?:has|orders|"
    r"gets|takes)\b|\bonly (?:drinks|eats|uses)\b|\bdefault\b|\bgo-to\b"
)


# "Favourite meal is …", "the best bonsai species": a preference named by its noun.
_NAMED_PREFERENCE = re.compile(r"\b(?:favou?rite|best|preferred|go-to) (?:\w+ )?(\w{3,})\b")


# "Favourite way to spend a day off is …": the frame names the attribute, whatever
# the value (surfing or trail running), as "His favourite meal is …" does.
_OPENING_FAVOURITE = re.compile(r"^\s*(?:favou?rite|preferred|go-to) (\w{3,})\b")


def _aspect_of(text: str, memory_type: str) -> str:
    lowered = text.lower().replace("’", "'")
    favourite = _OPENING_FAVOURITE.match(lowered)
    if favourite:
        return f"preference:{favourite.group(1)}"
    aspect = next(
        (name for name, pattern in _COMPILED_ASPECTS if pattern.search(lowered)),
        UNPLACED_EVENT if memory_type == "episodic" else "",
    )
    if memory_type == "preference" and not aspect:
        named = _NAMED_PREFERENCE.search(lowered)
        if named:
            return f"preference:{named.group(1)}"
    if memory_type == "preference" and aspect and _SINGLE_CHOICE.search(lowered):
        return f"preference:{aspect}"
    return aspect


def is_multi_valued(aspect: str) -> bool:
    """Several values at once (two allergies), unless a preference of one choice or
    an attribute named as one ("the accountant")."""
    if aspect.startswith(("preference:", "the ")):
        return False
    return aspect in MULTI_VALUED or aspect == ""


# --- occasion --------------------------------------------------------------------

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d\d)(?:-(\d\d))?\b")
# "19.04.2025", "1/11/2025": day first (month first only where the day cannot
# be a month, "03/17/2026"); "on 19.2." is a day and month of the year of writing.
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})([./])(\d{1,2})\2((?:19|20)\d\d)\b")
_NUMERIC_DAY_MONTH = re.compile(r"\bon (\d{1,2})\.(\d{1,2})\.(?!\d)")
_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? ({_MONTH})\b\.?,?(?: ((?:19|20)\d\d))?", re.I
)
_MONTH_DAY = re.compile(
    rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?\b,?(?: ((?:19|20)\d\d))?", re.I
)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,? ((?:19|20)\d\d)\b", re.I)
_MONTH_ALONE = re.compile(rf"\b(?:in|last|this|next|early|late|mid-?) ({_MONTH})\b", re.I)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")
# Holidays that name their month ("Christmas 2025" is December 2025).
HOLIDAY_MONTHS = {
    "christmas": 12,
    "xmas": 12,
    "boxing day": 12,
    "new year's eve": 12,
    "hogmanay": 12,
    "new year's day": 1,
    "valentine's day": 2,
    "halloween": 10,
    "thanksgiving": 11,
    "bonfire night": 11,
    "guy fawkes": 11,
    "midsummer": 6,
}
_HOLIDAY = re.compile(
    r"\b(" + "|".join(re.escape(name) for name in HOLIDAY_MONTHS).replace("'", "['’]") + r")\b",
    re.I,
)
_DAY_ONLY = re.compile(r"\bon the (\d{1,2})(?:st|nd|rd|th)\b", re.I)
# Words that make an event another occurrence of one told before.
ANOTHER_OCCASION = re.compile(
    r"\bagain\b|\banother\b|\bonce more\b|\b(?:second|third|fourth|fifth|next) (?:time|trip|"
    r"visit|one)\b|\bthis time\b|\bthis year'?s\b|\blast year'?s\b|\bannual\b|\brepeat\w*\b"
)


def occasion_of(text: str, written: datetime | date | None) -> str:
    """ "2019-05", "2027", "2026-03-14", or "~2026-03-14" (the day it was written)."""
    match = _ISO_DATE.search(text)
    if match:
        year, month, day = match.groups()
        return f"{year}-{month}" + (f"-{day}" if day else "")
    year_of_writing = written.year if written is not None else None
    numeric = _numeric_date(text, year_of_writing)
    if numeric:
        return numeric
    for pattern, order in ((_DAY_MONTH, "dmy"), (_MONTH_DAY, "mdy")):
        match = pattern.search(text)
        if match:
            if order == "dmy":
                day, month, year = match.groups()
            else:
                month, day, year = match.groups()
            year = year or _year_near(text, year_of_writing)
            number = MONTHS[month.lower().rstrip(".")]
            prefix = f"{year}-" if year else "????-"
            return f"{prefix}{number:02d}-{int(day):02d}"
    match = _MONTH_YEAR.search(text)
    if match:
        month = f"{match.group(2)}-{MONTHS[match.group(1).lower().rstrip('.')]:02d}"
        return month + _day_told_apart(text)
    match = _HOLIDAY.search(text)
    if match:
        year = _year_near(text, year_of_writing)
        month = HOLIDAY_MONTHS[match.group(1).lower().replace("’", "'")]
        return f"{year}-{month:02d}" if year else f"????-{month:02d}"
    match = _MONTH_ALONE.search(text)
    if match:
        year = _year_near(text, year_of_writing)
        number = MONTHS[match.group(1).lower()]
        day = _day_told_apart(text)
        return (f"{year}-{number:02d}" if year else f"????-{number:02d}") + day
    match = _YEAR.search(text)
    if match:
        return match.group(1)
    if written is not None:
        moment = written.date() if isinstance(written, datetime) else written
        match = _DAY_ONLY.search(text)
        if match:
            return f"{moment.year}-{moment.month:02d}-{int(match.group(1)):02d}"
        return f"~{moment.isoformat()}"
    return ""


def _day_told_apart(text: str) -> str:
    """ "-14" of "Her July 2024 lesson was on the 14th": the day a text gives
    apart from its month, or ""."""
    match = _DAY_ONLY.search(text)
    day = int(match.group(1)) if match else 0
    return f"-{day:02d}" if 1 <= day <= 31 else ""


def _numeric_date(text: str, year_of_writing: int | None) -> str:
    """ "2025-04-19" of "19.04.2025" or "19/04/2025"; "" when the text has none."""
    match = _NUMERIC_DATE.search(text)
    if match:
        first, separator, second, year = match.groups()
        day, month = int(first), int(second)
        if separator == "/" and month > 12 >= day:
            day, month = month, day
    else:
        match = _NUMERIC_DAY_MONTH.search(text)
        if not match or year_of_writing is None:
            return ""
        day, month, year = int(match.group(1)), int(match.group(2)), year_of_writing
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return ""
    return f"{year}-{month:02d}-{day:02d}"


def _year_near(text: str, year_of_writing: int | None) -> int | None:
    match = _YEAR.search(text)
    if match:
        return int(match.group(1))
    return year_of_writing


def same_occasion(first: str, second: str, *, new_text: str = "") -> bool | None:
    """Whether two occasions are one; None when either is unknown.

    Dates are compared at the coarser of the two precisions ("2019" and
    "2019-05" agree); a date inferred from the day of writing ("~…") agrees
    with another within ``SAME_OCCASION_MAX_DAYS``. A new text that says
    "again", "another", "next time" is always another occasion.
    """
    if new_text and ANOTHER_OCCASION.search(new_text.lower()):
        return False
    if not first or not second:
        return None
    if first.startswith("~") or second.startswith("~"):
        first_day, second_day = _as_date(first), _as_date(second)
        if first_day is None or second_day is None:
            return None
        if first.startswith("~") and second.startswith("~"):
            return abs((first_day - second_day).days) < SAME_OCCASION_MAX_DAYS
        # One date from the text, one from writing: the written one is at most
        # a little after the event it tells (or before an appointment).
        return abs((first_day - second_day).days) < SAME_OCCASION_MAX_DAYS * 3
    first_parts, second_parts = first.split("-"), second.split("-")
    if (len(first_parts) == 1) != (len(second_parts) == 1) and first_parts[0] == second_parts[0]:
        # "in 2025" against "in June 2025": the year alone cannot tell.
        return None
    for mine, theirs in zip(first_parts, second_parts, strict=False):
        if "?" in mine or "?" in theirs:
            continue
        if mine != theirs:
            # Same year and month, another day: a corrected date of one event.
            return (
                len(first_parts) == len(second_parts) == 3 and first_parts[:2] == second_parts[:2]
            )
    return True


def _as_date(occasion: str) -> date | None:
    parts = occasion.lstrip("~").split("-")
    try:
        year = int(parts[0])
        month = int(parts[1]) if len(parts) > 1 else 6
        day = int(parts[2]) if len(parts) > 2 else 15
        return date(year, month, day)
    except (ValueError, IndexError):
        return None


# --- the whole -------------------------------------------------------------------


def derive_about(
    content: str,
    memory_type: str,
    *,
    entities: tuple[str, ...] | list[str] = (),
    written: datetime | date | None = None,
    owner_names: tuple[str, ...] = (),
    known: KnownSubjects | Callable[[About], KnownSubjects] | None = None,
) -> About:
    """What a memory of this text and type is about, by the rules above.

    ``owner_names`` are the names the owner goes by ("Alice", "Alice Smith"):
    a memory about one of them is about the owner. ``known``: whom the owner's
    store already names (``known_subjects``), which completes a bare name or
    relation ("Akosua" as "mother Akosua").
    """
    subject, kind, relation_aspect = _subject_of(content, tuple(entities))
    made = _MADE_A_GRANDPARENT.search(content)
    if made:
        # "Theo was born, making Gerry a grandad": news of Gerry's grandchildren.
        who = made.group(1)
        subject, kind = (SELF, SELF) if who.lower() in _OBJECT_PRONOUNS else (who, PERSON)
    if kind == PERSON and (
        is_the_owner(subject, owner_names) or _acts_on_the_owner(content, subject)
    ):
        subject, kind = SELF, SELF
    if kind == SELF and not relation_aspect:
        # "Has a sister named Maria": who the owner's sister is.
        named = _HAS_A_NAMED.search(content)
        if named and _role(named.group(1)):
            relation_aspect = _relation_aspect(_role(named.group(1)))
        elif _REPORTS_TO.search(content):
            # "Reports to Tobi Mensah": who the owner's manager is.
            relation_aspect = _relation_aspect("manager")
    aspect = relation_aspect or _aspect_of(_without_subject(content, subject, kind), memory_type)
    occasion = occasion_of(content, written) if memory_type == "episodic" else ""
    about = About(
        subject=subject[:MAX_SUBJECT_CHARS],
        kind=kind,
        aspect=aspect[:MAX_ASPECT_CHARS],
        occasion=occasion[:MAX_OCCASION_CHARS],
        set_by=SET_BY_RULES,
    )
    return with_known_subject(about, known)


_MADE_A_GRANDPARENT = re.compile(
    r"\b(?:making|made|makes) ([A-Z][\w'’-]+|him|her|me|us|them) an? (?:\w+ )?" + GRANDPARENT_WORDS
)
_OBJECT_PRONOUNS = frozenset({"him", "her", "me", "us", "them"})
_HAS_A_NAMED = re.compile(r"\b(?:has|have|had) an? (?:\w+ )?([\w-]+),? (?:named|called) [A-Z]")
_REPORTS_TO = re.compile(r"\b(?i:reports?) (?:directly )?to (?:the )?[A-Z]")


# Whose work is the owner's care: "Her GP switched her medication" is about the owner.
CARER_ROLES = frozenset({"doctor", "gp", "dentist", "physio", "therapist", "vet", "coach"})


def _acts_on_the_owner(content: str, subject: str) -> bool:
    """Someone else does something to or for the owner, whom a memory names as
    him: "Claire gave him her old iPhone", "The GP doubled his atorvastatin"."""
    clause = _first_clause(content).lower().replace("’", "'")
    role, _ = split_subject(subject.casefold())
    if role in CARER_ROLES and re.search(r"\b(?:his|her|him)\b", clause):
        return True
    # "Rusty goes everywhere with him": company, not something done to the owner.
    return bool(re.search(r"(?<!\bwith )\b(?:him|himself)\b", clause))


def owner_names_of(user) -> tuple[str, ...]:
    """The names an owner goes by, for ``derive_about``: the account's first name,
    full name and a username that reads as a name."""
    names = [getattr(user, "first_name", ""), getattr(user, "get_full_name", lambda: "")()]
    username = getattr(user, "username", "") or ""
    if username.isalpha():
        names.append(username)
    return tuple(dict.fromkeys(name.strip() for name in names if name and name.strip()))


def is_the_owner(subject: str, owner_names: tuple[str, ...]) -> bool:
    role, name = split_subject(subject)
    if role or not name:
        return False
    folded = name.casefold()
    return any(
        folded == owner.casefold() or folded == owner.split()[0].casefold() for owner in owner_names
    )


def _without_subject(content: str, subject: str, kind: str) -> str:
    """The text less its subject phrase, so "My wife works at …" is about a
    job, not a partner ("wife" names the subject, not the aspect)."""
    if kind == SELF:
        return content
    role, name = split_subject(subject)
    text = content
    for part in (*role.split("'s "), name):
        if part:
            text = re.sub(rf"\b{re.escape(part)}('s)?\b", " ", text, count=1, flags=re.I)
    return text


def about_of(memory) -> About:
    """The stored about of a memory row; derived on the fly when it has none yet."""
    if getattr(memory, "about_kind", ""):
        return About(
            subject=memory.about_subject,
            kind=memory.about_kind,
            aspect=memory.about_aspect,
            occasion=memory.about_occasion,
            set_by=memory.about_set_by or SET_BY_RULES,
        )
    return derive_about(
        memory.content,
        memory.type,
        entities=tuple(memory.entity_refs or ()),
        written=memory.created_at,
    )


def about_fields(about: About) -> dict[str, str]:
    """The model's column values for an about."""
    return {
        "about_subject": about.subject,
        "about_kind": about.kind,
        "about_aspect": about.aspect,
        "about_occasion": about.occasion,
        "about_set_by": about.set_by,
    }


def checked_about(value: dict | None, *, set_by: str = SET_BY_OWNER) -> About | None:
    """An about given by a caller (API, form, import): checked, or ValueError."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("about must be an object with subject, kind, aspect and occasion.")
    unknown = set(value) - {"subject", "kind", "aspect", "occasion", "set_by"}
    if unknown:
        raise ValueError(f"about has no field {sorted(unknown)[0]!r}.")
    kind = str(value.get("kind") or (SELF if value.get("subject", SELF) == SELF else PERSON))
    if kind not in SUBJECT_KINDS:
        raise ValueError(f"about.kind must be one of: {', '.join(SUBJECT_KINDS)}.")
    subject = " ".join(str(value.get("subject") or "").split()) or SELF
    if kind == SELF:
        subject = SELF
    elif subject == SELF:
        raise ValueError("about.subject must name whom or what, unless kind is 'self'.")
    aspect = " ".join(str(value.get("aspect") or "").lower().split())
    occasion = " ".join(str(value.get("occasion") or "").split())
    for name, text, limit in (
        ("subject", subject, MAX_SUBJECT_CHARS),
        ("aspect", aspect, MAX_ASPECT_CHARS),
        ("occasion", occasion, MAX_OCCASION_CHARS),
    ):
        if len(text) > limit:
            raise ValueError(f"about.{name} is {len(text)} characters; at most {limit}.")
    given_by = str(value.get("set_by") or set_by)
    if given_by not in SET_BY:
        given_by = set_by
    return About(subject=subject, kind=kind, aspect=aspect, occasion=occasion, set_by=given_by)


def with_set_by(about: About, set_by: str) -> About:
    return replace(about, set_by=set_by)


# --- the aspect by meaning ------------------------------------------------------------

# When no cue pattern names a memory's aspect, the embedding model does: the
# aspect whose examples the memory's vector is closest to, if it is close
# enough and clearly closer than the next ("Has switched to a Kia Niro" is
# about a car though no pattern knows the make). Examples are generic
# phrasings, never a labelled set's sentences.
ASPECT_EXAMPLES: dict[str, tuple[str, ...]] = {
    "home": (
        "Lives in a flat in the city.",
        "Their house is on a quiet street.",
        "Rents an apartment.",
    ),
    "hometown": ("Grew up in a small town.", "Was born abroad.", "Comes from the north."),
    "job": (
        "Works as an accountant.",
        "Is employed by a bank.",
        "Earns a living as a carpenter.",
        "Teaches at a primary school.",
    ),
    "work-schedule": (
        "Works night shifts.",
        "Works from home on Fridays.",
        "Works four days a week.",
    ),
    "commute": ("Cycles to work.", "Takes the train to the office.", "Drives to work every day."),
    "education": (
        "Is studying for a degree.",
        "Is a student at university.",
        "Is in year three at school.",
    ),
    "partner": ("Is married.", "Has a girlfriend.", "Is divorced.", "Is single."),
    "children": ("Has two kids.", "Is a mother of three.", "Has a son and a daughter."),
    "birthday": ("Birthday is in June.", "Was born on the fourth of May."),
    "age": ("Is forty years old.", "Turned sixty last year."),
    "health": (
        "Has asthma.",
        "Was diagnosed with diabetes.",
        "Has a bad knee.",
        "Wears glasses.",
        "Has high blood pressure.",
    ),
    "medication": ("Takes blood pressure tablets.", "Is on antidepressants.", "Uses an inhaler."),
    "allergy": ("Is allergic to nuts.", "Has a penicillin allergy."),
    "diet": ("Is vegetarian.", "Does not eat meat.", "Avoids gluten."),
    "drink": ("Drinks coffee with milk.", "Does not drink alcohol.", "Likes a cup of tea."),
    "food": ("Loves Italian food.", "Favourite dish is curry.", "Likes spicy food."),
    "fitness": ("Goes running every morning.", "Works out at the gym.", "Does yoga."),
    "sport": ("Plays tennis.", "Supports a football team.", "Watches baseball."),
    "hobby": (
        "Enjoys painting.",
        "Does woodwork in the shed.",
        "Collects stamps.",
        "Grows vegetables.",
    ),
    "music": ("Plays the guitar.", "Listens to jazz.", "Sings in a choir."),
    "reading": ("Reads crime novels.", "Is in a book club."),
    "tv-film": ("Watches documentaries.", "Likes science fiction films.", "Listens to podcasts."),
    "travel": ("Went on holiday to Spain.", "Flew abroad for a trip.", "Travels a lot."),
    "car": ("Drives a small hatchback.", "Bought a new car.", "Has an electric vehicle."),
    "phone": ("Uses an iPhone.", "Has an Android phone."),
    "computer": (
        "Uses a laptop for work.",
        "Works in a code editor.",
        "Uses spreadsheet software.",
    ),
    "pet": ("Has a dog.", "Owns two cats."),
    "language": ("Speaks French.", "Is learning Spanish."),
    "finance": ("Saves into a pension.", "Has a mortgage with the bank."),
    "subscription": (
        "Pays a monthly phone plan.",
        "Has a gym membership.",
        "Subscribes to a streaming service.",
    ),
    "appointment": ("Has a dentist appointment next week.", "Is booked for a check-up."),
    "sleep": ("Goes to bed early.", "Sleeps badly.", "Wakes up at six."),
    "religion": ("Goes to church on Sundays.",),
    "politics": ("Votes for the green party.",),
    "plans": ("Plans to retire next year.", "Wants to move abroad."),
}
# The closest aspect's cosine must reach this, and beat the next by the margin.
ASPECT_BY_MEANING_MIN_COSINE = 0.40
ASPECT_BY_MEANING_MARGIN = 0.03

_aspect_centres: dict[str, tuple[list[str], object]] = {}


def aspect_by_meaning(vector, provider) -> str:
    """The aspect whose examples ``vector`` is closest to, or "" when none is
    close enough or clearly closest. ``provider`` embeds the examples once per
    process (``embed(texts) -> vectors``)."""
    import numpy as np

    if vector is None or provider is None:
        return ""
    key = repr(provider)
    if key not in _aspect_centres:
        names = list(ASPECT_EXAMPLES)
        texts = [text for name in names for text in ASPECT_EXAMPLES[name]]
        vectors = np.asarray(provider.embed(texts), dtype=float)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        centres, start = [], 0
        for name in names:
            count = len(ASPECT_EXAMPLES[name])
            centre = vectors[start : start + count].mean(axis=0)
            centres.append(centre / np.linalg.norm(centre))
            start += count
        _aspect_centres[key] = (names, np.asarray(centres))
    names, centres = _aspect_centres[key]
    query = np.asarray(vector, dtype=float)
    norm = np.linalg.norm(query)
    if not norm:
        return ""
    scores = centres @ (query / norm)
    order = np.argsort(scores)[::-1]
    best, second = scores[order[0]], scores[order[1]]
    if best < ASPECT_BY_MEANING_MIN_COSINE or best - second < ASPECT_BY_MEANING_MARGIN:
        return ""
    return names[order[0]]


def refined(about: About, memory_type: str, vector, provider) -> About:
    """``about`` with an aspect by meaning where the rules found none."""
    if about.set_by != SET_BY_RULES or (about.aspect and about.aspect != UNPLACED_EVENT):
        return about
    aspect = aspect_by_meaning(vector, provider)
    if not aspect:
        return about
    if memory_type == "preference":
        aspect = f"preference:{aspect}"
    return replace(about, aspect=aspect)


# --- which memory is current --------------------------------------------------------


def topic_of(aspect: str) -> str:
    """ "preference:seat" and "seat" are one topic (a preference stated as a fact),
    "the thesis topic" and "the thesis" one attribute named two ways."""
    topic = aspect.removeprefix("preference:").removeprefix("the ")
    return topic.split()[0] if topic else topic


def same_aspect(first: About, second: About) -> bool | None:
    """Whether two abouts name one aspect; None when either is unknown (an
    event that no pattern places, "event", names none: "Moved the notes into
    Obsidian" may well change "Keeps notes in Notion")."""
    if not first.aspect or not second.aspect or UNPLACED_EVENT in (first.aspect, second.aspect):
        return None
    return topic_of(first.aspect) == topic_of(second.aspect)


_PLAIN_WORDS = frozenset(
    [
        "this",
        "that",
        "with",
        "from",
        "have",
        "has",
        "had",
        "been",
        "were",
        "their",
        "there",
        "about",
        "into",
        "over",
        "after",
        "before",
        "every",
        "each",
        "some",
        "more",
        "most",
        "much",
        "many",
        "very",
        "also",
        "just",
        "still",
        "now",
        "then",
        "than",
        "when",
        "what",
        "which",
        "where",
        "while",
        "would",
        "could",
        "should",
        "will",
        "does",
        "doesn't",
        "didn't",
        "isn't",
        "wasn't",
        "these",
        "those",
        "them",
    ]
)


def _object_words(text: str) -> set[str]:
    """Content words past a fact's opening verb, cut to a rough stem."""
    words = [word.lower() for word in _words(text)][1:]
    return {word[:5] for word in words if len(word) > 3 and word not in _PLAIN_WORDS}


# Aspects are read from a few words of each text. Two memories about one
# subject whose embeddings are this alike share an aspect when the rules name
# none for one of them ...
SAME_ASPECT_MIN_SIMILARITY = 0.5
# ... and even when the rules name two (memories about two aspects of one
# subject run 0.44 to 0.74 alike on the labelled pairs' dev split).
SAME_FACT_MIN_SIMILARITY = 0.8


def newer_replaces(
    older: About,
    newer: About,
    older_text: str,
    newer_text: str,
    *,
    similarity: float | None = None,
) -> bool:
    """Whether, for a question about how things stand now, a newer memory
    makes an older one out of date: the same subject and aspect, and for an
    aspect of several values (medications, hobbies) the same object named again.
    ``similarity`` (of the two embeddings) stands in for an aspect the rules
    could not read, and overrides two aspects only when the texts are nearly
    one fact."""
    if not same_subject(older, newer):
        return False
    aspect = same_aspect(older, newer)
    threshold = SAME_FACT_MIN_SIMILARITY if aspect is False else SAME_ASPECT_MIN_SIMILARITY
    close = similarity is not None and similarity >= threshold
    if not (aspect or close):
        return False
    if close:
        return True
    if not (is_multi_valued(older.aspect) or is_multi_valued(newer.aspect)):
        return True
    return bool(_object_words(older_text) & _object_words(newer_text))


_ASKED_RELATION = re.compile(
    r"\b(?:my|our)\s+(?:(?:" + "|".join(sorted(_ROLE_ADJECTIVES)) + r")\s+)*([\w'’-]+)"
    r"(?:\s+([A-Z][\w'’-]+))?"
)


# "Who is my manager now?", "Who's our GP these days?": which person holds a
# relation of the owner's, as "My manager is Hannah" says.
_ASKED_WHO_IS = re.compile(
    r"\bwho(?:'s|’s|\s+is|\s+was)\s+(?:my|our)\s+(?:(?:"
    + "|".join(sorted(_ROLE_ADJECTIVES))
    + r")\s+)*([\w-]+)(?=\s*(?:now|these days|currently|at the moment|nowadays|today)?\s*\??\s*$)",
    re.IGNORECASE,
)


def _asked_relation(query: str) -> str:
    """The relation a "Who is my …?" question asks of ("manager"), or ""."""
    match = _ASKED_WHO_IS.search(query.strip())
    role = _role(match.group(1)) if match else ""
    return _relation_aspect(role) if role else ""


def asked_about(query: str) -> About:
    """Whom a question asks about: "my brother Arjun", "Mum's", "Biscuit", "Helen";
    the owner when it names nobody ("Where do I live now?") or asks in the first
    person ("Am I still seeing Ruth?") or asks who holds a relation of theirs
    ("Who is my manager now?": the owner's manager, as "My manager is Hannah")."""
    if _asked_relation(query):
        return About()
    for match in _ASKED_RELATION.finditer(query):
        role = _role(match.group(1))
        if role:
            name = (match.group(2) or "").replace("’", "'").removesuffix("'s")
            return About(f"{role} {name}".strip(), PERSON)
    words = _words(query)
    for word in words:
        bare = word.removesuffix("'s")
        if _role(bare) and word[0].isupper():
            return About(_role(bare), PERSON)
    if {word.lower() for word in words} & _FIRST_PERSON:
        # "Which part of London do I live in?", "Am I still seeing Ruth?", "my
        # current PB": the owner asks about themself; a name is the object.
        return About()
    for index, word in enumerate(words):
        bare = word.removesuffix("'s")
        if index and _is_name(bare) and bare.lower() not in _OPENING_WORDS | {"i", "i'm"}:
            return About(bare, PERSON)
    return About()


# The owner as the one who does or has ("I", "my"), not as an object ("Did
# Helen tell me?" asks about Helen).
_FIRST_PERSON = frozenset(["i", "i'm", "i've", "i'd", "i'll", "my"])


# How a question asks of an aspect where a statement of it reads otherwise
# ("Where do I work now?" names no employer; "Works at Globex" does).
QUESTION_ASPECT_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "work-schedule",
        r"\b(?:what|which) days (?:do|does|am|is) (?:\w+ ){1,2}(?:work|teach)\w*|"
        r"\bdays a week (?:do|does|am|is) (?:\w+ ){1,2}(?:work|teach)\w*",
    ),
    (
        "job",
        r"\b(?:where|who) (?:do|does|did) (?:\w+ ){1,3}work(?: for)?\b|"
        r"\bwhat (?:do|does) (?:\w+ ){1,2}do for (?:a )?(?:living|work)\b",
    ),
)
_COMPILED_QUESTION_ASPECTS = tuple(
    (aspect, re.compile(pattern)) for aspect, pattern in QUESTION_ASPECT_PATTERNS
)


def asked_aspect(query: str) -> str:
    """Which aspect a question asks of ("Which town do I live in now?": home;
    "What car do I drive now?": car; "Who is my manager now?": manager;
    "Where do I work now?": job), or '' when it names none."""
    lowered = query.lower()
    asked = next(
        (name for name, pattern in _COMPILED_QUESTION_ASPECTS if pattern.search(lowered)), ""
    )
    return _asked_relation(query) or asked or _aspect_of(query, "semantic")
