"""What one question of a conversation records: the shape `evidence ask` prints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from core.models import (
    CurrentAnswer,
    DocumentStanding,
    FollowupHit,
    LaterAnswer,
    LaterVersion,
)

Role = Literal["user", "assistant"]
DecidedBy = Literal["first_turn", "rules", "llm"]


class HistoryMessage(BaseModel):
    """A message the reformulation saw, and why it was in view."""

    turn: int
    role: Role
    text: str
    why: Literal["recent", "similar"] = "recent"


class DecisionPart(BaseModel):
    """One part of the continuation decision: its name, what it added to the sum, and why."""

    name: str
    weight: float
    detail: str


class Continuation(BaseModel):
    """Whether a question continues the previous answer's topic (seed 001's isFollowUp) and
    needs the conversation to be understood (its needsReformulation)."""

    is_continuation: bool
    reason: str = Field(description="one sentence")
    decided_by: DecidedBy
    confidence: float | None = Field(
        None, description="0..1 that the question continues the topic; none from a model")
    needs_conversation: bool | None = None
    parts: list[DecisionPart] = Field(default_factory=list)
    signals: dict[str, Any] = Field(default_factory=dict)


class AnswerEvidence(BaseModel):
    """One chunk of seed 004's split, with every score it was given."""

    id: str
    source: str
    page: int | None = None
    section: str | None = Field(None, description="the document's heading path at the chunk")
    ocr: bool = Field(False, description="read by OCR from a PDF page without a text layer")
    type: str
    text: str
    vector_rank: int | None = None
    vector_score: float | None = Field(None, description="cosine similarity to the query")
    lexical_rank: int | None = None
    lexical_score: float | None = Field(None, description="BM25 score (higher is better)")
    fused_score: float | None = Field(None, description="reciprocal rank fusion score")
    anchor_boost: float = Field(0.0, description="added to the fused score (anchoring)")
    rerank_score: float | None = Field(None, description="cross-encoder relevance 0..1")
    final_score: float | None = None
    unanchored_rank: int | None = None
    round_number: int | None = Field(None, description="a follow-up answer's round")
    answered_at: str | None = Field(None, description="a follow-up answer's timestamp")
    later_answer: LaterAnswer | None = Field(
        None, description="for an earlier answer: the newest answer to its criterion, which "
                          "stands just ahead of it")
    brought_in: str | None = Field(
        None, description="the id of the earlier answer this newest answer was brought in "
                          "for, or of the superseded document's excerpt this current "
                          "version's excerpt was brought in for (no search ranked it)")
    later_version: LaterVersion | None = Field(
        None, description="for an excerpt of a superseded document: its series' current "
                          "version, whose best excerpt stands just ahead of it")
    document: DocumentStanding | None = Field(
        None, description="for a document's excerpt: its kind, date and standing")


class AskTurn(BaseModel):
    """One question and its answer: printed by `evidence ask`, kept in the store."""

    vendor_id: str
    conversation_id: str
    turn: int
    question: str
    search_query: str
    question_as_asked_weight: float = Field(
        0.0, description="the weight of the question's own search, fused with the search "
                         "query's when the two differ (calibrated form); 0: the search query "
                         "alone")
    continuation: Continuation
    history: list[HistoryMessage]
    anchor_documents: list[str]
    anchor_weights: dict[str, float] = Field(
        default_factory=dict, description="each anchor document's share of the boost (its "
                                          "part in the previous answer); none under seed 001")
    anchor_places: dict[str, int] = Field(
        default_factory=dict, description="each anchor document's best place in the question's "
                                          "own search, which divides its boost; a document "
                                          "not in the searched window is left out and gets "
                                          "none; none under seed 001")
    anchoring: str = ""
    answer: str
    answered_by: str
    answer_evidence: list[AnswerEvidence]
    suggestion_evidence: list[AnswerEvidence]
    related: list[str] = Field(default_factory=list)
    suggested_questions: list[str] = Field(default_factory=list)
    followups: list[FollowupHit] = Field(default_factory=list)
    current_answer: CurrentAnswer | None = Field(
        None, description="the newest answer to the criterion the question is linked to")
    notes: list[str] = Field(default_factory=list)
    asked_at: str = ""
    reranker: str = ""
    timings_ms: dict[str, float] = Field(default_factory=dict)

    @property
    def cited_ids(self) -> list[str]:
        """The chunks that backed the answer (seed 001's retrievedContextJson)."""
        return [e.id for e in self.answer_evidence] + [f.id for f in self.followups]

    @property
    def cited_documents(self) -> list[str]:
        """The documents the answer drew on, in order of first use."""
        return list(dict.fromkeys(e.source for e in self.answer_evidence))


class ConversationSummary(BaseModel):
    """One line of `evidence conversations`."""

    conversation_id: str
    turns: int
    started: str
    last: str
    first_question: str = ""
