"""Forms of the owner's pages. They validate and shape input; the model methods act.

The memory rules are the model's (memories/models.py): a field runs the
model's check (``RuledField``) and shows its sentence next to it, the same the
API answers; its widget passes the model's limit on as ``maxlength``.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator

from memories.about import (
    MAX_ASPECT_CHARS,
    MAX_OCCASION_CHARS,
    MAX_SUBJECT_CHARS,
    SELF,
    SET_BY_OWNER,
    SUBJECT_KINDS,
    About,
    checked_about,
)
from memories.api_tokens import SCOPES
from memories.models import (
    MAX_ENTITIES,
    MAX_ENTITY_CHARS,
    MAX_REASON_CHARS,
    MAX_SEARCH_CHARS,
    InvalidMemory,
    Memory,
    check_content,
    check_entities,
    check_entity_filter,
    check_reason,
    check_search,
)
from memories.vocabulary import type_choices
from retrieval.constants import LEGS, PIPELINES

TOKEN_NAME_MAX_CHARS = 100
# Entities are typed as one comma-separated line: room for the most names of
# the longest length, with their separators; the names themselves are checked
# one by one against the model's limits.
ENTITIES_LINE_MAX_CHARS = MAX_ENTITIES * (MAX_ENTITY_CHARS + 2)


def split_entities(text: str) -> list[str]:
    """Entities typed as one comma-separated line."""
    return [name.strip() for name in text.split(",") if name.strip()]


class RuledField(forms.CharField):
    """Text checked by a memory rule of the model (``rule``, a ``check_*`` of
    memories/models.py), whose sentence is the field's error. ``limit`` only
    goes to the browser (``maxlength``, and ``max_length`` for the templates):
    Django's own length check, in its own words, is left out."""

    def __init__(self, *, rule=None, limit: int | None = None, **kwargs) -> None:
        self.rule = rule
        kwargs.setdefault("strip", True)
        super().__init__(max_length=limit, **kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, MaxLengthValidator)]

    def validate(self, value) -> None:
        super().validate(value)
        if self.rule is not None and value not in self.empty_values:
            try:
                self.rule(value)
            except InvalidMemory as error:
                raise forms.ValidationError(error.message, code=error.code)


def reason_field(**kwargs) -> RuledField:
    kwargs.setdefault("required", False)
    kwargs.setdefault("label", "Reason (optional)")
    return RuledField(rule=check_reason, limit=MAX_REASON_CHARS, **kwargs)


class ReasonForm(forms.Form):
    reason = reason_field()


class MemoryFieldsForm(forms.Form):
    """What a memory says: its text, type and entities."""

    # The content limit is a setting: check_content reads it on each call.
    content = RuledField(
        rule=check_content,
        limit=settings.MAX_CONTENT_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "dir": "auto"}),
    )
    type = forms.ChoiceField(choices=type_choices)
    entities = RuledField(
        required=False,
        limit=ENTITIES_LINE_MAX_CHARS,
        help_text="Separate names with commas.",
        widget=forms.TextInput(attrs={"dir": "auto"}),
    )

    def clean_entities(self) -> list[str]:
        try:
            return check_entities(split_entities(self.cleaned_data["entities"]))
        except InvalidMemory as error:
            raise forms.ValidationError(error.message, code=error.code)


class MemoryAddForm(MemoryFieldsForm):
    """A memory the owner writes: remembered at once, like the API's mode remember."""

    content = RuledField(
        rule=check_content,
        limit=settings.MAX_CONTENT_CHARS,
        label="What should your assistant remember?",
        widget=forms.Textarea(attrs={"rows": 2, "dir": "auto"}),
    )
    entities = RuledField(
        required=False,
        limit=ENTITIES_LINE_MAX_CHARS,
        label="Entities (optional)",
        help_text="People, places or things it names, separated by commas.",
        widget=forms.TextInput(attrs={"dir": "auto"}),
    )

    def __init__(self, *args, **kwargs) -> None:
        # Its own ids: it shares pages with the filters, which have a "type" too.
        kwargs.setdefault("auto_id", "add-%s")
        super().__init__(*args, **kwargs)


class MemoryEditForm(MemoryFieldsForm):
    """A new version of a memory: supersede on an active one, edit-then-confirm on a
    proposal (optionally as the new version of an active memory it updates), and
    what the memory is about, which the owner may correct."""

    about_subject = RuledField(
        required=False,
        limit=MAX_SUBJECT_CHARS,
        label="About whom or what",
        help_text='"you", or a person, pet, organisation or thing: "brother Tom", "Biscuit".',
        widget=forms.TextInput(attrs={"dir": "auto"}),
    )
    about_kind = forms.ChoiceField(
        # Not required: a post without the about fields (a script, an older
        # page) keeps the memory's about as it is.
        required=False,
        choices=[(kind, kind.capitalize()) for kind in SUBJECT_KINDS],
        label="Which is",
        initial=SELF,
    )
    about_aspect = RuledField(
        required=False,
        limit=MAX_ASPECT_CHARS,
        label="Aspect",
        help_text='What about them: "home", "job", "commute", "preference:seat", ….',
    )
    about_occasion = RuledField(
        required=False,
        limit=MAX_OCCASION_CHARS,
        label="Occasion (events)",
        help_text='When, for an event: "2019-05", "2027-04-12".',
    )
    replaces = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        label="Confirm as",
        widget=forms.RadioSelect,
    )
    reason = reason_field()

    def __init__(self, *args, replaceable: list[Memory] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # A proposal may be confirmed as the new version of an active memory it
        # repeats or updates; anything else has nothing to replace.
        self.replaceable = replaceable or []
        if self.replaceable:
            self.fields["replaces"].choices = [("", "a new memory, beside the others")] + [
                (str(memory.pk), f"the new version of #{memory.pk}: {memory.content[:80]}")
                for memory in self.replaceable
            ]
        else:
            del self.fields["replaces"]

    @classmethod
    def for_memory(
        cls, memory: Memory, replaceable: list[Memory] | None = None, replaces: int | None = None
    ) -> MemoryEditForm:
        about = memory.about
        return cls(
            initial={
                "content": memory.content,
                "type": memory.type,
                "entities": ", ".join(memory.entity_refs),
                "about_subject": "you" if about.kind == SELF else about.subject,
                "about_kind": about.kind,
                "about_aspect": about.aspect,
                "about_occasion": about.occasion,
                "replaces": replaces,
            },
            replaceable=replaceable,
        )

    def about_given(self, memory: Memory) -> About | None:
        """The about the owner set, or None when the fields still say what the
        memory's about already says (a new text then gets its about read anew)."""
        given = self.cleaned_data.get("about")
        if given is None:
            return None
        current = memory.about
        if (given.subject, given.kind, given.aspect, given.occasion) == (
            current.subject,
            current.kind,
            current.aspect,
            current.occasion,
        ):
            return None
        return given

    def clean(self) -> dict:
        data = super().clean()
        kind = data.get("about_kind")
        subject = data.get("about_subject", "")
        data["about"] = None
        if not kind:
            return data
        if kind != SELF and subject.casefold() in {"", "you", "self"}:
            self.add_error("about_subject", "Say whom or what it is about.")
            return data
        if kind == SELF or subject.casefold() in {"you", "me", "self", "myself", "owner"}:
            kind, subject = SELF, SELF
        given = {
            "subject": subject,
            "kind": kind,
            "aspect": data.get("about_aspect", ""),
            "occasion": data.get("about_occasion", ""),
        }
        # The API's check (memories/about.py), and its sentence beside the field.
        try:
            data["about"] = checked_about(given, set_by=SET_BY_OWNER)
        except ValueError as error:
            field = "about_" + str(error).split(" ", 1)[0].removeprefix("about.")
            self.add_error(field if field in self.fields else None, str(error))
        return data


class MemoryIdsField(forms.Field):
    """Several memory ids (ticked checkboxes). Ownership is checked against the database."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {
        "required": "Select at least one memory.",
        "invalid": "Memory ids are whole numbers.",
    }

    def to_python(self, value) -> list[int]:
        if not value:
            return []
        values = value if isinstance(value, list | tuple) else [value]
        if not all(str(item).isdigit() for item in values):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return sorted({int(item) for item in values})


class MemoryIdsForm(forms.Form):
    ids = MemoryIdsField()
    reason = reason_field()


class BulkActionForm(forms.Form):
    ACTIONS = [("confirm", "Confirm"), ("reject", "Reject")]

    action = forms.ChoiceField(choices=ACTIONS)
    ids = MemoryIdsField()
    reason = reason_field()


SORTS = {
    "newest": ("Newest first", ["-created_at", "-id"]),
    "oldest": ("Oldest first", ["created_at", "id"]),
    "confirmed": ("Recently confirmed", ["-last_confirmed_at", "-id"]),
    "confidence": ("Highest confidence", ["-confidence", "-created_at", "-id"]),
    "type": ("Type", ["type", "-created_at", "-id"]),
}


class MemoryFilterForm(forms.Form):
    q = RuledField(required=False, rule=check_search, limit=MAX_SEARCH_CHARS, label="Search text")
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Memory.Status.choices])
    type = forms.ChoiceField(required=False, choices=[("", "Any type"), *type_choices()])
    source = forms.ChoiceField(required=False, choices=[("", "Any source"), *Memory.Source.choices])
    entity = RuledField(required=False, rule=check_entity_filter, limit=MAX_ENTITY_CHARS)
    created_from = forms.DateField(
        required=False, label="Created from", widget=forms.DateInput(attrs={"type": "date"})
    )
    created_to = forms.DateField(
        required=False, label="Created until", widget=forms.DateInput(attrs={"type": "date"})
    )
    sort = forms.ChoiceField(
        required=False,
        choices=[(key, label) for key, (label, _) in SORTS.items()],
        label="Sort by",
    )

    def ordering(self) -> list[str]:
        key = self.cleaned_data.get("sort") or "newest"
        return SORTS[key][1]


class InspectForm(forms.Form):
    message = forms.CharField(
        max_length=settings.MAX_CONTENT_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Something you might say to your assistant.",
    )
    pipeline = forms.ChoiceField(
        choices=[(name, name.capitalize()) for name in PIPELINES],
        initial=settings.DEFAULT_PIPELINE,
    )
    budget = forms.IntegerField(
        min_value=1,
        max_value=settings.MAX_TOKEN_BUDGET,
        initial=settings.DEFAULT_TOKEN_BUDGET,
        label="Token budget",
    )
    as_of = forms.DateTimeField(
        required=False,
        label="As of",
        help_text="Empty: now. Read in your time zone.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    legs = forms.MultipleChoiceField(
        required=False,
        choices=[(name, name.capitalize()) for name in LEGS],
        initial=list(LEGS),
        widget=forms.CheckboxSelectMultiple,
        label="Legs (fusion only)",
        help_text="None ticked: all legs.",
    )


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=TOKEN_NAME_MAX_CHARS,
        strip=True,
        label="Token name",
        help_text="Where the token will be used, e.g. “laptop assistant”.",
    )
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in SCOPES],
        initial=list(SCOPES),
        widget=forms.CheckboxSelectMultiple,
        label="It may",
        error_messages={"required": "Pick at least one scope: read, propose or write."},
    )


class RedactForm(forms.Form):
    """Erase a memory's text: this version, or every version of its chain."""

    SCOPES = [
        ("version", "This version only"),
        ("chain", "Every version of its chain"),
    ]

    scope = forms.ChoiceField(choices=SCOPES, initial="version", widget=forms.RadioSelect)
    reason = reason_field(
        required=True,
        label="Reason",
        help_text="Kept in the history. Say why without repeating what the memory says.",
        error_messages={"required": "Give a reason: it is kept in the history."},
    )
