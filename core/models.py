"""pydantic models: the questionnaire payload, stored chunks, candidates, and the trace."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    computed_field,
    create_model,
    field_validator,
)

from core.config import (
    MAX_ANSWER_CHARS,
    MAX_QUESTION_CHARS,
    MAX_QUESTIONNAIRE_BYTES,
    MAX_RESPONSES_PER_ROUND,
    MAX_ROUND_NUMBER,
    SEED_CONSTANT_NAMES,
    Settings,
)
from core.hashing import response_key

VENDOR_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")

FOLLOWUP_SOURCE_TYPE = "follow_up_response"
DOCUMENT_SOURCE_TYPE = "document"

# "control": linked through a control the criterion is mapped to (its own tier, between a
# reworded hash match and the semantic path's finds).
Tier = Literal["high", "medium", "control", "low"]
FoundBy = Literal["hash", "semantic", "first_stage", "near_copy", "control"]
# Who decided that a control answers a criterion: the ranking over the catalog (confident
# proposals link until a person decides) or a reviewer.
MappingStatus = Literal["proposed", "accepted"]
# What became of a follow-up in one retrieval: the one vocabulary of traces and pages.
FollowupFate = Literal["in_context", "excerpt", "round_cap", "crowded_out", "not_selected",
                       "not_found"]
DropFate = Literal["round_cap", "crowded_out"]
# The short status a page shows for each fate (a dropped follow-up's reason says which drop).
FATE_STATUS: dict[str, str] = {
    "in_context": "in context",
    "excerpt": "in context as an excerpt",
    "round_cap": "dropped",
    "crowded_out": "dropped",
    "not_selected": "not in context",
    "not_found": "not found by this strategy",
}
FATE_MEANING: dict[str, str] = {
    "in_context": "in the context's follow-up entry",
    "excerpt": "in the context as an ordinary excerpt",
    "round_cap": "dropped by the round cap (MAX_FOLLOWUP_ROUNDS)",
    "crowded_out": "crowded out of the follow-up entry by a higher tier",
    "not_selected": "found, but not among the evidence the context holds",
    "not_found": "not found by this strategy",
}


def is_valid_vendor_id(vendor_id: object) -> bool:
    """True when the id matches CONTRACT.md's VENDOR pattern."""
    return isinstance(vendor_id, str) and VENDOR_ID_PATTERN.fullmatch(vendor_id) is not None


def followup_type(round_number: int) -> str:
    """Seed 002's `type` value for a follow-up text response."""
    return f"followup_response:{round_number}"


def parse_iso_timestamp(value: str) -> datetime:
    """Parse ISO 8601; a time without a zone is taken as UTC."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PayloadLimits:
    """What one questionnaire round may hold; the defaults are Settings' defaults."""

    max_responses: int = MAX_RESPONSES_PER_ROUND
    max_question_chars: int = MAX_QUESTION_CHARS
    max_answer_chars: int = MAX_ANSWER_CHARS
    max_bytes: int = MAX_QUESTIONNAIRE_BYTES

    @classmethod
    def from_settings(cls, settings: Settings) -> PayloadLimits:
        """The limits a Settings object configures."""
        return cls(max_responses=settings.max_responses_per_round,
                   max_question_chars=settings.max_question_chars,
                   max_answer_chars=settings.max_answer_chars,
                   max_bytes=settings.max_questionnaire_bytes)


def payload_limits(info: ValidationInfo) -> PayloadLimits:
    """The limits passed as validation context, else the defaults."""
    context = info.context
    limits = context.get("limits") if isinstance(context, dict) else None
    return limits if isinstance(limits, PayloadLimits) else PayloadLimits()


def check_vendor_text(value: str, max_chars: int) -> str:
    """Refuse text the store cannot hold faithfully or that no reviewer could read."""
    if "\x00" in value:
        raise ValueError(f"contains a NUL character (at position {value.index(chr(0))})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, from a JSON escape such as \ud800
        raise ValueError(
            f"contains an unpaired surrogate at position {exc.start}, which is not valid "
            "Unicode") from None
    if len(value) > max_chars:
        raise ValueError(f"is {len(value):,} characters long; at most {max_chars:,} are allowed")
    return value


# A questionnaire's own id of a question ("CEK-12.1", "HFIH-01", "A.1.1"), as vendors and
# reviewers refer to answers.
MAX_QUESTIONNAIRE_ID_CHARS = 64


class ResponseOrigin(BaseModel):
    """Where a response was read from, when a workbook holds it: shown as its source."""

    model_config = ConfigDict(frozen=True)

    file: str
    sheet: str | None = None
    row: int | None = None
    layout: str | None = None  # "CAIQ v4.0.3"
    # The layout's other columns for this question: control ownership, CCM control id...
    extras: dict[str, str] = Field(default_factory=dict)
    # The file answers the same id on another sheet too (an on-premises and a hosted sheet):
    # the sheet is part of the answer's identity, so both answers are kept.
    by_sheet: bool = False


class QuestionnaireResponse(BaseModel):
    """One answered question of a follow-up round (seed 003 bulk API)."""

    criterion_question_text: StrictStr | None = None
    question_text: StrictStr
    answer_text: StrictStr
    questionnaire_id: StrictStr | None = None
    origin: ResponseOrigin | None = None

    @field_validator("questionnaire_id")
    @classmethod
    def _questionnaire_id(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if len(value) > MAX_QUESTIONNAIRE_ID_CHARS or any(
                ch < " " or ch == "\x7f" for ch in value):
            raise ValueError(f"must be at most {MAX_QUESTIONNAIRE_ID_CHARS} characters on one "
                             "line")
        return value

    @property
    def key(self) -> str:
        """The response's identity in its round: its criterion and question, and its
        questionnaire id where it has one (the CAIQ asks one question under three ids), and
        its sheet where the file answers the id on several sheets."""
        sheet = self.origin.sheet if self.origin is not None and self.origin.by_sheet else None
        return response_key(self.criterion_question_text, self.question_text,
                            self.questionnaire_id, sheet)

    @field_validator("question_text", "answer_text")
    @classmethod
    def _question_and_answer(cls, value: str, info: ValidationInfo) -> str:
        if not value.strip():
            raise ValueError("is blank")
        limits = payload_limits(info)
        if info.field_name == "answer_text":
            return check_vendor_text(value, limits.max_answer_chars)
        return check_vendor_text(value, limits.max_question_chars)

    @field_validator("criterion_question_text")
    @classmethod
    def _blank_criterion_is_ad_hoc(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value or not value.strip():
            return None
        return check_vendor_text(value, payload_limits(info).max_question_chars)


class QuestionnairePayload(BaseModel):
    """A whole follow-up round: refused whole when any part is wrong."""

    vendor_id: StrictStr
    round_number: StrictInt = Field(ge=1, le=MAX_ROUND_NUMBER)
    timestamp: StrictStr
    responses: list[QuestionnaireResponse]

    @field_validator("vendor_id")
    @classmethod
    def _vendor_id(cls, value: str) -> str:
        if not is_valid_vendor_id(value):
            raise ValueError(
                "must be 1-63 letters, digits, '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("timestamp")
    @classmethod
    def _iso_timestamp(cls, value: str) -> str:
        try:
            parse_iso_timestamp(value).astimezone(UTC).timestamp()
        except ValueError:
            raise ValueError("is not an ISO 8601 date and time") from None
        except OverflowError:  # a valid date whose zone takes it outside years 1-9999 in UTC
            raise ValueError("is outside the years 1 to 9999 once converted to UTC") from None
        return value

    @field_validator("responses")
    @classmethod
    def _responses(cls, value: list[QuestionnaireResponse]) -> list[QuestionnaireResponse]:
        if not value:
            raise ValueError("is empty; a round needs at least one response")
        seen: dict[str, int] = {}
        for index, response in enumerate(value):
            key = response.key
            if key in seen:
                pair = ("(questionnaire_id, criterion_question_text, question_text)"
                        if response.questionnaire_id else
                        "(criterion_question_text, question_text) pair")
                raise ValueError(f"entry {index} repeats the {pair} of entry {seen[key]}")
            seen[key] = index
        return value

    @property
    def timestamp_utc(self) -> datetime:
        return parse_iso_timestamp(self.timestamp).astimezone(UTC)


class StoredRecord(BaseModel):
    """A record as written to ChromaDB: id, embedded text and flat metadata."""

    id: str
    text: str
    # ChromaDB merges an upsert's metadata into the record's stored metadata: a key given as
    # None is removed (a withdrawn answer's marker clears every key of the answer this way).
    metadata: dict[str, str | int | float | bool | None]


class RerankerStatus(BaseModel):
    """Which reranker ran, or why none did."""

    name: str
    ran: bool
    reason: str


class LaterAnswer(BaseModel):
    """The newest answer to the criterion an earlier answer answers: a later round answered
    the same criterion (its hash, its questionnaire id, or a criteria file's link by id)."""

    model_config = ConfigDict(frozen=True)

    id: str
    round_number: int
    answered_at: str = Field(description="the newest answer's timestamp, as the round gave it")


DocumentKind = Literal["policy", "report", "certificate", "letter", "questionnaire_page",
                       "other"]
Opinion = Literal["unmodified", "qualified", "adverse", "disclaimer"]
# What dates a document's place in its series, in the order they are asked (CONTRACT.md).
DATE_BASES = ("period_end", "as_of", "reviewed_on", "received_at")


class DocumentFacts(BaseModel):
    """What a document says of itself, read from its text at ingest: its kind, title, issuer,
    the standard it attests to, its scope and its dates (ISO dates; None where the text states
    none), and for an auditor's report its opinion and the matters it names."""

    model_config = ConfigDict(frozen=True)

    kind: DocumentKind = "other"
    title: str | None = None
    issuer: str | None = Field(None, description="the audit firm or certification body; "
                                                 "'the vendor' for its own documents")
    family: str | None = Field(None, description="the standard or kind of report it is: "
                                                 "'SOC 2 Type II', 'ISO/IEC 27001', ...")
    scope: str | None = None
    period_start: str | None = None
    period_end: str | None = None
    as_of: str | None = None
    valid_until: str | None = None
    version: str | None = None
    effective_on: str | None = None
    reviewed_on: str | None = None
    opinion: Opinion | None = None
    matters: list[str] = Field(default_factory=list)

    @property
    def stated_date(self) -> tuple[str, str] | None:
        """(the date that places the document in its series, which field it is) from its own
        text: the period's end, else its date, else its review; None when it states none."""
        for basis in DATE_BASES[:-1]:
            value = getattr(self, basis)
            if value:
                return value, basis
        return None


class LaterVersion(BaseModel):
    """The current version of the series a superseded document belongs to."""

    model_config = ConfigDict(frozen=True)

    source: str
    date: str | None = Field(None, description="the current version's date (ISO)")


class DocumentStanding(BaseModel):
    """Where a document version stands in time, as an excerpt of it is labelled: its kind and
    date, whether its text states that date, whether it is its series' current version, and
    whether it went stale."""

    model_config = ConfigDict(frozen=True)

    kind: DocumentKind = "other"
    title: str | None = None
    series: str
    date: str = Field(description="the date that orders the series (ISO)")
    date_basis: str = Field(description="period_end, as_of, reviewed_on or received_at")
    date_stated: bool
    period_start: str | None = None
    period_end: str | None = None
    valid_until: str | None = None
    current: bool = True
    earlier_versions: int = Field(0, description="versions of its series older than it")
    stale: str | None = None


class AnswerControl(BaseModel):
    """The control a follow-up answer is keyed by: its framework, its id as the framework
    writes it, and its title where the project ships the framework's text (NIST SP 800-53)."""

    model_config = ConfigDict(frozen=True)

    framework: str
    id: str
    title: str | None = None


class ControlLinkReason(BaseModel):
    """The control through which an answer links to a criterion, and who mapped the
    criterion to it; `via` names the answer's own id when a crosswalk joined the two
    (an ISO/IEC 27001:2013 id that maps to the 800-53 control)."""

    model_config = ConfigDict(frozen=True)

    id: str
    title: str | None = None
    status: MappingStatus
    framework: str = "NIST SP 800-53 Rev. 5"
    via: str | None = None

    def label(self) -> str:
        """'linked by control AC-7 (Unsuccessful Logon Attempts), proposed'."""
        title = f" ({self.title})" if self.title else ""
        via = f" through {self.via}" if self.via else ""
        return f"linked by control {self.id}{title}{via}, {self.status}"


class CriterionControl(BaseModel):
    """A control that answers a criterion, as `criteria map` lists it: proposed by the
    ranking over the catalog (with its score) or accepted by a reviewer."""

    model_config = ConfigDict(frozen=True)

    framework: str
    id: str
    title: str | None = None
    score: float | None = None
    status: MappingStatus


class CurrentAnswer(BaseModel):
    """A criterion's newest answer: the vendor's position now."""

    model_config = ConfigDict(frozen=True)

    id: str
    round_number: int
    answered_at: str
    source: str
    question_text: str
    answer_text: str
    questionnaire_id: str | None = None
    content: str = Field("", description="the answer's record as stored (its question and "
                                         "answer), as judgments grade it")
    control: AnswerControl | None = Field(
        None, description="the control the answer is keyed by, where its id is a known "
                          "framework's")
    linked_by_control: ControlLinkReason | None = Field(
        None, description="the control through which it answers the criterion, where no "
                          "hash or questionnaire id links it")
    sheet: str | None = Field(None, description="the workbook sheet it was answered on")


class Candidate(BaseModel):
    """One piece of evidence with every score it was given, side by side."""

    id: str
    type: str
    source: str
    page: int | None = None
    section: str | None = Field(
        None, description="the document's section the chunk comes from: its heading path, "
                          "such as 'Access control > Passwords' (None where the document has "
                          "no headings)")
    round_number: int | None = None
    ocr: bool = Field(False, description="read by OCR from a PDF page without a text layer")
    text: str
    first_stage_score: float | None = Field(
        None, description="the first stage's score: cosine similarity of query and chunk "
                          "embeddings (1 - distance) for the vector search; the fused score "
                          "(vector and lexical, reciprocal rank fusion) for a hybrid one"
    )
    first_stage_rank: int | None = None
    vector_rank: int | None = Field(
        None, description="hybrid first stage: rank in the vector search's list (1 = best); "
                          "None where that list did not hold the chunk or no fusion ran")
    vector_score: float | None = Field(
        None, description="hybrid first stage: cosine similarity of query and chunk "
                          "embeddings; None where the vector list did not hold the chunk")
    lexical_rank: int | None = Field(
        None, description="hybrid first stage: rank in the lexical (BM25) list (1 = best); "
                          "None where that list did not hold the chunk or no fusion ran")
    lexical_score: float | None = Field(
        None, description="hybrid first stage: BM25 score (SQLite FTS5, negated so higher "
                          "is better); None where the lexical list did not hold the chunk")
    fused_score: float | None = Field(
        None, description="hybrid first stage: reciprocal rank fusion, the sum of "
                          "1 / (rrf_k + rank) over the lists holding the chunk")
    rerank_score: float | None = Field(None, description="cross-encoder relevance, 0..1")
    boost: float = 1.0
    final_score: float | None = None
    rank_before_boost: int | None = None
    rank_after_boost: int | None = None
    later_answer: LaterAnswer | None = Field(
        None, description="for a follow-up answer: the newest answer to its criterion when a "
                          "later round answered it; None for the newest and for documents")
    brought_in: str | None = Field(
        None, description="why an excerpt no search ranked is here: the id of the earlier "
                          "answer it is the newest answer for, or of the superseded "
                          "document's excerpt it is the current version for")
    other_sheet_of: str | None = Field(
        None, description="for an answer no search ranked: the id of the excerpt answering "
                          "the same question on another sheet of the same round (an "
                          "on-premises and a cloud sheet), which it stands beside")
    later_version: LaterVersion | None = Field(
        None, description="for an excerpt of a superseded document: its series' current "
                          "version; None for a current document and for answers")
    document: DocumentStanding | None = Field(
        None, description="for a document's excerpt: its kind, date and standing in its "
                          "series")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_followup(self) -> bool:
        return self.metadata.get("source_type") == FOLLOWUP_SOURCE_TYPE


class FollowupHit(BaseModel):
    """A follow-up response found for a criterion, with why it sits in its tier."""

    id: str
    round_number: int
    timestamp: str
    source: str
    content: str
    questionnaire_id: str | None = Field(
        None, description="the questionnaire's own id of the question (CEK-12.1), where the "
                          "answer came with one")
    criterion_question_text: str | None
    criterion_question_hash: str | None
    question_text: str
    answer_text: str
    hash_match: bool
    linked_by_id: bool = Field(
        False, description="linked because it answers a questionnaire id the criterion is "
                           "mapped to (a criteria file's questionnaire_ids), not by its "
                           "criterion text")
    control: AnswerControl | None = Field(
        None, description="the control the answer is keyed by, where its questionnaire id is "
                          "a known framework's (NIST SP 800-53, ISO/IEC 27001, CSA CAIQ)")
    linked_by_control: ControlLinkReason | None = Field(
        None, description="the control mapped to the criterion through which this answer "
                          "links to it (tier `control`), where no hash or id links it")
    sheet: str | None = Field(None, description="the workbook sheet it was answered on, "
                                                "where the workbook has several")
    typographic_variants: list[str] = Field(
        default_factory=list,
        description="how the linked criterion text differs from this criterion only in "
                    "typography (curly apostrophe, zero-width space, Unicode normal form...); "
                    "empty when it links by the exact hash")
    found_by: list[FoundBy] = Field(default_factory=list)
    # How the follow-up's linked criterion text differs from this criterion by typos, as the
    # decision to vouch for it found (typo, word pairs; [] for punctuation alone); None when
    # no such decision was made. The tier's reason is read from it, never recomputed; it
    # is cleared once the tier is assigned, so a tiered hit equals its stored form.
    typo_corrections: list[tuple[str, str]] | None = Field(None, exclude=True)
    question_similarity: float
    tier: Tier | None = None
    tier_reason: str = ""
    first_stage_score: float | None = None
    first_stage_rank: int | None = None
    later_answer: LaterAnswer | None = Field(
        None, description="the newest answer to this answer's criterion when a later round "
                          "answered it; None when this is the newest")


def by_round(hits: Iterable[FollowupHit], *, newest_first: bool = False) -> list[FollowupHit]:
    """Follow-ups in round order, then by answer time: the one ordering of rounds."""
    return sorted(hits, key=lambda h: (h.round_number, h.timestamp), reverse=newest_first)


class DroppedFollowup(BaseModel):
    """A follow-up that was found but left out of the context, and why."""

    followup: FollowupHit
    reason: str
    fate: DropFate = "round_cap"


# The retrieval constants in force for one trace: Settings' seed fields, with their types
# and defaults (a trace written without one reads it as the default).
SeedConstants = create_model(
    "SeedConstants",
    __doc__="The retrieval constants in force for one trace (Settings' names, lower case).",
    **{name: (Settings.model_fields[name].annotation, Settings.model_fields[name].default)
       for name in SEED_CONSTANT_NAMES},
)


class BoostOutcome(BaseModel):
    """What seed 002's follow-up document boost did to one ranking."""

    factor: float
    cap: float | None
    boosted: int = Field(description="follow-up document chunks whose score was multiplied")
    moved: int = Field(description="candidates whose rank the boost changed")

    @property
    def changed_ranking(self) -> bool:
        return self.moved > 0


class RetrievalTrace(BaseModel):
    """Every stage of one retrieval: what the CLI prints and the dashboard draws."""

    model_config = ConfigDict(arbitrary_types_allowed=False)

    vendor_id: str
    criterion: str
    criterion_hash: str
    questionnaire_ids: list[str] = Field(
        default_factory=list, description="the questionnaire ids the criterion is mapped to; "
                                          "answers to them link as a hash match does")
    controls: list[CriterionControl] = Field(
        default_factory=list,
        description="the controls the criterion is mapped to (accepted by a reviewer, or the "
                    "confident proposals until one decides) where the vendor's answers are "
                    "keyed by controls; answers keyed by them link in the `control` tier")
    strategy: str
    reranker: RerankerStatus
    embedding_model: str
    constants: SeedConstants  # type: ignore[valid-type]
    context: str = ""
    prompt: str = ""
    current_answer: CurrentAnswer | None = Field(
        None, description="the criterion's newest answer in the vendor's store, whatever the "
                          "strategy kept; None when no round answered it")
    followups: list[FollowupHit] = Field(default_factory=list)
    evidence: list[Candidate] = Field(default_factory=list)
    first_stage: list[Candidate] = Field(default_factory=list)
    hash_path: list[FollowupHit] | None = None
    semantic_path: list[FollowupHit] | None = None
    reranked: list[Candidate] = Field(default_factory=list)
    dropped_followups: list[DroppedFollowup] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    boost: BoostOutcome | None = Field(
        None, description="the follow-up document boost; None when the strategy applies none")

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def fates(self) -> dict[str, FollowupFate]:
        """Follow-up id -> what became of it, for every follow-up this retrieval saw."""
        fates: dict[str, FollowupFate] = {}
        for hit in [*(self.hash_path or []), *(self.semantic_path or [])]:
            fates[hit.id] = "not_selected"
        for candidate in self.first_stage:
            if candidate.is_followup:
                fates[candidate.id] = "not_selected"
        for dropped in self.dropped_followups:
            fates[dropped.followup.id] = dropped.fate
        for candidate in self.evidence:
            if candidate.is_followup:
                fates[candidate.id] = "excerpt"
        for hit in self.followups:
            fates[hit.id] = "in_context"
        return fates

    def fate(self, followup_id: str) -> FollowupFate:
        """What became of a follow-up here; "not_found" for one this retrieval never saw."""
        return self.fates.get(followup_id, "not_found")

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON object `evidence retrieve --format json` prints."""
        return self.model_dump(mode="json")
