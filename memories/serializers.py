"""Request validation and response shapes of the API.

Request serializers are strict: unknown fields, wrong JSON types (a number
where a string belongs, "true" where a boolean belongs), NUL bytes, lone
surrogates and over-long values are 400s, never coerced. Response serializers
only document the shapes for the OpenAPI schema; the bodies themselves come
from ``memories.memory_json`` so that a memory has one JSON shape everywhere.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.validators import MaxLengthValidator
from rest_framework import serializers

from memories.about import SET_BY, SET_BY_OWNER, SUBJECT_KINDS, About, checked_about
from memories.models import (
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_REASON_CHARS,
    MAX_SEARCH_CHARS,
    MAX_SESSION_ID_CHARS,
    InvalidMemory,
    Memory,
    MemoryEvent,
    check_content,
    check_entities,
    check_entity_filter,
    check_reason,
    check_search,
    check_session_id,
)
from retrieval.constants import PIPELINES
from retrieval.names import PROFILE_NAMES

# The memory rules are the model's (memories/models.py): a field below runs the
# model's check and answers its sentence under the field's name, the same the
# pages show. The limits a field is given (max_length) only tell the schema.
MAX_CURSOR_CHARS = 500
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# The most proposals one confirm or reject settles as its copies.
MAX_COPIES = 100

ALL_STATUSES = "all"
STATUS_FILTER_CHOICES = [*Memory.Status.values, ALL_STATUSES]
LEG_STATUSES = ["ok", "skipped", "failed", "timeout"]


# --- the whole body ------------------------------------------------------------


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(text: str, field: str, what: str) -> None:
    found = LONE_SURROGATE.search(text)
    if found:
        escaped = f"\\u{ord(found.group()):04x}"
        field = field.encode("utf-8", "backslashreplace").decode("utf-8") or "body"
        raise serializers.ValidationError(
            {field: [f"{what} a lone surrogate ({escaped}), which is not text."]}, code="invalid"
        )


def reject_lone_surrogates(data: Any) -> None:
    """400 when any string of a parsed JSON body, or any field name, holds a lone
    surrogate: JSON can spell one ("\\ud800") but it is not text, cannot be stored
    and cannot be sent back. Checked once at parse time, so no field, enum or
    error message ever sees one."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            _check_text(value, path, "Holds")
        elif isinstance(value, dict):
            for key, inner in value.items():
                field = f"{path}.{key}" if path else key
                _check_text(key, field, "The field name holds")
                stack.append((field, inner))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", inner) for index, inner in enumerate(value))


# --- strict fields -------------------------------------------------------------


class StrictCharField(serializers.CharField):
    """A JSON string and nothing else (DRF would turn 12 into "12")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        if isinstance(data, float) and not math.isfinite(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictDateTimeField(serializers.DateTimeField):
    def to_internal_value(self, data: Any):
        # Python's fromisoformat stops at a NUL ("...T00:00:00\x00junk" would be
        # that date), so a date-time with a control character is refused whole.
        if not isinstance(data, str) or not data.isprintable():
            self.fail("invalid", format="an ISO 8601 date-time string")
        try:
            return super().to_internal_value(data)
        except (OverflowError, OSError):
            # A date at the edge of the calendar that cannot move to UTC.
            self.fail("invalid", format="an ISO 8601 date-time string")


class ModelRule:
    """A DRF validator that runs a memory rule of the model (``check_*``) and
    answers its ``InvalidMemory`` sentence as the field's error."""

    def __init__(self, check) -> None:
        self.check = check

    def __call__(self, value: Any) -> None:
        try:
            self.check(value)
        except InvalidMemory as error:
            raise serializers.ValidationError(error.message, code=error.code)


class RuledField:
    """A field checked by the model's rule (``rule``) instead of DRF's own
    length check: ``max_length`` stays for the OpenAPI schema only."""

    def __init__(self, *, rule=None, **kwargs) -> None:
        super().__init__(**kwargs)
        kept = [v for v in self.validators if not isinstance(v, MaxLengthValidator)]
        self.validators = kept + ([ModelRule(rule)] if rule is not None else [])


class RuledCharField(RuledField, StrictCharField):
    pass


class RuledQueryField(RuledField, serializers.CharField):
    """A query parameter (a string already) checked by the model's rule."""


class RuledListField(RuledField, serializers.ListField):
    pass


class StrictSerializer(serializers.Serializer):
    """Rejects fields it does not know, so a typo is an error, not a silent default."""

    def to_internal_value(self, data: Any) -> dict:
        if isinstance(data, Mapping):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                raise serializers.ValidationError(
                    {key: ["Unknown field."] for key in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)


def _type_field(**kwargs) -> StrictChoiceField:
    return StrictChoiceField(choices=Memory.Type.choices, **kwargs)


def _entities_field(**kwargs) -> serializers.ListField:
    kwargs.setdefault("help_text", "Names of people, places and things the memory is about.")
    # Counted and measured as stored (trimmed, de-duplicated): check_entities.
    return RuledListField(
        child=RuledCharField(max_length=MAX_ENTITY_CHARS),
        max_length=MAX_ENTITIES,
        rule=check_entities,
        **kwargs,
    )


def _content_field(**kwargs) -> StrictCharField:
    kwargs.setdefault(
        "help_text",
        "The memory itself, one fact in plain words "
        f"(at most {settings.MAX_CONTENT_CHARS} characters).",
    )
    # The limit is a setting, which check_content reads per request.
    return RuledCharField(max_length=settings.MAX_CONTENT_CHARS, rule=check_content, **kwargs)


def _reason_field(**kwargs) -> StrictCharField:
    return RuledCharField(
        required=False,
        allow_blank=True,
        max_length=MAX_REASON_CHARS,
        rule=check_reason,
        **kwargs,
    )


def _session_id_field(**kwargs) -> StrictCharField:
    return RuledCharField(max_length=MAX_SESSION_ID_CHARS, rule=check_session_id, **kwargs)


def _check_content_length(value: str) -> str:
    # The limit is a setting: read it per request, not once at import.
    limit = settings.MAX_CONTENT_CHARS
    if len(value) > limit:
        raise serializers.ValidationError(
            f"Ensure this field has no more than {limit} characters.", code="max_length"
        )
    return value


# --- requests --------------------------------------------------------------------


class AboutField(serializers.JSONField):
    """What a memory is about, given by the caller (memories/about.py checks it)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault(
            "help_text",
            "What the memory is about: {subject, kind, aspect, occasion}; kind is one of "
            f"{', '.join(SUBJECT_KINDS)}. Left out, it is read from the text.",
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> About:
        try:
            return checked_about(data, set_by=SET_BY_OWNER)
        except ValueError as error:
            raise serializers.ValidationError(str(error))


class MemoryCreateSerializer(StrictSerializer):
    class Mode:
        REMEMBER = "remember"
        PROPOSE = "propose"

    content = _content_field()
    type = _type_field(help_text="semantic (a fact), preference, episodic (an event), reflection.")
    mode = StrictChoiceField(
        choices=[Mode.REMEMBER, Mode.PROPOSE],
        help_text="remember: the owner's explicit fact, active at once with confidence 1. "
        "propose: staged in the owner's confirmation queue.",
    )
    entities = _entities_field(required=False)
    confidence = StrictFloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="Only with mode propose (default 0.5); a remembered fact is always 1.",
    )
    session_id = _session_id_field(required=False, allow_blank=True)
    about = AboutField(required=False)

    def validate(self, attrs: dict) -> dict:
        if attrs["mode"] == self.Mode.REMEMBER and "confidence" in attrs:
            raise serializers.ValidationError(
                {"confidence": ["Only with mode propose: a remembered fact has confidence 1."]}
            )
        return attrs


class MemoryActionSerializer(StrictSerializer):
    ACTIONS = (
        "confirm",
        "reject",
        "reconfirm",
        "archive",
        "supersede",
        "restore",
        "redact",
        "erase_from_disk",
    )
    # Fields that describe the new version, so only a supersede may carry them.
    VERSION_FIELDS = ("content", "type", "entities", "confidence", "about")

    action = StrictChoiceField(
        choices=ACTIONS,
        help_text="confirm / reject a proposal; reconfirm / archive an active memory; "
        "supersede it with a new version (needs content); restore a rejected memory to "
        "the confirmation queue; redact: erase its text for good (needs a reason); "
        "erase_from_disk: remove what a redacted memory left in the database's files "
        "(answers the erase's state; asking again never queues a second one).",
    )
    replaces = StrictIntegerField(
        required=False,
        min_value=1,
        help_text="confirm only: the id of an active memory this proposal replaces; it "
        "becomes superseded by the confirmed proposal (409 if it is no longer active).",
    )
    copies = serializers.ListField(
        child=StrictIntegerField(min_value=1),
        required=False,
        max_length=MAX_COPIES,
        help_text="confirm / reject only: the ids of the owner's other proposals that are "
        "copies of this one (a proposal's related memories with status proposed); they are "
        "rejected as its duplicates in the same decision, and the answer's settled_copies "
        "names those that were still pending.",
    )
    reason = _reason_field(help_text="Why, for the memory's history.")
    content = _content_field(required=False, help_text="supersede only: the new version's text.")
    type = _type_field(required=False, help_text="supersede only: the new version's type.")
    entities = _entities_field(required=False)
    confidence = StrictFloatField(required=False, min_value=0.0, max_value=1.0)
    about = AboutField(required=False)
    chain = StrictBooleanField(
        required=False,
        help_text="redact only: erase every version of the memory's chain, not just this one.",
    )
    erase_from_disk = StrictBooleanField(
        required=False,
        help_text="redact only: also queue an erase from disk of the old bytes (see the "
        "erase_from_disk action for its state).",
    )

    def validate(self, attrs: dict) -> dict:
        if "chain" in attrs and attrs["action"] != "redact":
            raise serializers.ValidationError({"chain": ["Only a redact takes chain."]})
        if "erase_from_disk" in attrs and attrs["action"] != "redact":
            raise serializers.ValidationError(
                {"erase_from_disk": ["Only a redact takes erase_from_disk."]}
            )
        if attrs["action"] == "redact" and not attrs.get("reason", "").strip():
            raise serializers.ValidationError(
                {"reason": ["A redact needs a reason, for the record."]}
            )
        if attrs["action"] == "supersede" and "content" not in attrs and "about" not in attrs:
            raise serializers.ValidationError({"content": ["A supersede needs content."]})
        if "replaces" in attrs and attrs["action"] != "confirm":
            raise serializers.ValidationError({"replaces": ["Only a confirm takes replaces."]})
        if "copies" in attrs and attrs["action"] not in ("confirm", "reject"):
            raise serializers.ValidationError(
                {"copies": ["Only a confirm or a reject takes copies."]}
            )
        if attrs["action"] != "supersede":
            extra = [name for name in self.VERSION_FIELDS if name in attrs]
            if extra:
                raise serializers.ValidationError(
                    {name: [f"Only a supersede takes {name}."] for name in extra}
                )
        return attrs


class MemoryListQuerySerializer(StrictSerializer):
    status = serializers.ChoiceField(
        choices=STATUS_FILTER_CHOICES,
        default=Memory.Status.ACTIVE,
        help_text="Default active; 'all' for every status.",
    )
    type = serializers.ChoiceField(choices=Memory.Type.choices, required=False)
    entity = RuledQueryField(
        required=False,
        max_length=MAX_ENTITY_CHARS,
        rule=check_entity_filter,
        help_text="An entity's whole name, ignoring case and spacing.",
    )
    q = RuledQueryField(
        required=False,
        max_length=MAX_SEARCH_CHARS,
        rule=check_search,
        help_text="Text search, the same as the memories page's: every word and "
        '"quoted phrase" appears (ignoring case and accents) and no -word does, or '
        "English full-text search matches.",
    )
    session_id = RuledQueryField(
        required=False, max_length=MAX_SESSION_ID_CHARS, rule=check_session_id
    )
    cursor = serializers.CharField(
        required=False, max_length=MAX_CURSOR_CHARS, help_text="next_cursor of the previous page."
    )
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_PAGE_SIZE, default=DEFAULT_PAGE_SIZE
    )


class SearchSerializer(StrictSerializer):
    query = StrictCharField(
        max_length=settings.MAX_CONTENT_CHARS, help_text="The user's message, or any question."
    )
    session_id = StrictCharField(required=False, allow_blank=True, max_length=MAX_SESSION_ID_CHARS)
    token_budget = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=settings.MAX_TOKEN_BUDGET,
        help_text=f"Tokens the whole block may use (default {settings.DEFAULT_TOKEN_BUDGET}).",
    )
    pipeline = StrictChoiceField(
        choices=PIPELINES,
        required=False,
        help_text=f"Default {settings.DEFAULT_PIPELINE}.",
    )
    types = serializers.ListField(
        child=_type_field(), required=False, allow_empty=False, max_length=len(Memory.Type.values)
    )
    as_of = StrictDateTimeField(
        required=False, help_text="Search as if it were this moment (default now)."
    )
    explain = StrictBooleanField(
        required=False, help_text="Also return the candidates that were cut, and why."
    )

    def validate_query(self, value: str) -> str:
        return _check_content_length(value)

    def validate_token_budget(self, value: int) -> int:
        if value > settings.MAX_TOKEN_BUDGET:
            raise serializers.ValidationError(
                f"Ensure this value is less than or equal to {settings.MAX_TOKEN_BUDGET}."
            )
        return value


class InternalRetrieveSerializer(SearchSerializer):
    owner = StrictCharField(max_length=150, help_text="Username of the owner to retrieve for.")


# --- responses (schema only) -----------------------------------------------------


class AboutSerializer(serializers.Serializer):
    subject = serializers.CharField(
        help_text='"self" for the owner, else whom or what: "brother Tom", "Ana", "Biscuit".'
    )
    kind = serializers.ChoiceField(choices=list(SUBJECT_KINDS))
    aspect = serializers.CharField(
        allow_blank=True, help_text='Which aspect: "home", "job", "preference:seat", ….'
    )
    occasion = serializers.CharField(
        allow_blank=True,
        help_text='Events only: "2019-05", or "~2026-03-14" (the day it was written).',
    )
    set_by = serializers.ChoiceField(
        choices=list(SET_BY),
        help_text="Read from the text (rules, or llm where TIMOTHY_ABOUT_LLM is on), or given.",
    )


class MemorySerializer(serializers.Serializer):
    """The JSON shape of a memory (built by memories.memory_json.memory_to_dict)."""

    id = serializers.IntegerField()
    type = serializers.ChoiceField(choices=Memory.Type.choices)
    content = serializers.CharField()
    status = serializers.ChoiceField(choices=Memory.Status.choices)
    entities = serializers.ListField(child=serializers.CharField())
    confidence = serializers.FloatField()
    source = serializers.ChoiceField(choices=Memory.Source.choices)
    session_id = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    last_confirmed_at = serializers.DateTimeField(allow_null=True)
    last_retrieved_at = serializers.DateTimeField(allow_null=True)
    superseded_by = serializers.IntegerField(
        allow_null=True, help_text="The memory that replaced this one."
    )
    about = AboutSerializer(
        allow_null=True, help_text="What this version is about; null once redacted."
    )


class RelatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    relation = serializers.ChoiceField(
        choices=["duplicate", "update", "see_also"],
        help_text="duplicate: the same fact, however worded; update: the same subject and "
        "aspect with another value, or a corrected event; see_also: close, but about another "
        "person, occasion, aspect or object (offered for reference, never to replace).",
    )
    score = serializers.FloatField(help_text="Similarity, 0 to 1.")
    content = serializers.CharField(help_text="The related memory's text.")
    status = serializers.ChoiceField(
        choices=["active", "proposed"],
        help_text="proposed: it waits in the owner's confirmation queue.",
    )


class CreatedMemorySerializer(MemorySerializer):
    related = RelatedSerializer(
        many=True,
        help_text="Active memories this one repeats or updates, best first (empty if none). "
        "A remembered duplicate is written as a new version of the memory it repeats.",
    )


class MemoryPageSerializer(serializers.Serializer):
    memories = MemorySerializer(many=True)
    next_cursor = serializers.CharField(
        allow_null=True, help_text="Pass as ?cursor= for the next page; null on the last."
    )


class EventSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=MemoryEvent.Action.choices)
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_null=True, help_text="Username, or null for the system.")
    via = serializers.CharField(help_text="api, page, admin, command, extraction, ...")
    reason = serializers.CharField(allow_blank=True)
    data = serializers.DictField()


class ChainMemorySerializer(MemorySerializer):
    events = EventSerializer(many=True, help_text="Who did what to this version, when, why.")


class ChainSerializer(serializers.Serializer):
    head_id = serializers.IntegerField()
    memories = ChainMemorySerializer(many=True, help_text="Every version, oldest first.")


class ScoredMemorySerializer(MemorySerializer):
    score = serializers.FloatField()
    score_parts = serializers.DictField(help_text="How the score was made.")
    tokens = serializers.IntegerField(help_text="Tokens of this memory's line in the block.")
    shown_content = serializers.CharField(
        required=False,
        help_text="The text as the block shows it, when the memory was cut short to fit "
        "(no memory takes more than a share of the budget).",
    )
    position = serializers.IntegerField(
        allow_null=True, help_text="Line in the block (serial-position order)."
    )
    cut_reason = serializers.ChoiceField(
        choices=["below_min_score", "below_relative_cut", "past_falloff", "over_budget"],
        required=False,
    )


class LegReportSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=LEG_STATUSES)
    ms = serializers.FloatField()
    count = serializers.IntegerField()
    error = serializers.CharField(required=False)


class SearchResultSerializer(serializers.Serializer):
    pipeline = serializers.ChoiceField(choices=PIPELINES)
    profile = serializers.ChoiceField(
        choices=PROFILE_NAMES, help_text="The fusion profile in force (TIMOTHY_RETRIEVAL_PROFILE)."
    )
    as_of = serializers.DateTimeField()
    memories = ScoredMemorySerializer(many=True, help_text="Packed memories, best first.")
    block = serializers.CharField(
        allow_blank=True, help_text="The fenced block to append to the system prompt."
    )
    block_tokens = serializers.IntegerField()
    token_budget = serializers.IntegerField()
    legs = serializers.DictField(child=LegReportSerializer())
    ms = serializers.FloatField()
    cut = ScoredMemorySerializer(
        many=True, required=False, help_text="explain only: candidates left out."
    )


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField(required=False)


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
