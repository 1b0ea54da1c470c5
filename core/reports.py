"""What the library reports back: per-document and per-round ingest outcomes, vendor status."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

# How long work reports how far it got: (stage, done, total), e.g. ("embedding", 64, 300).
Progress = Callable[[str, int, int], None]


class DocumentOutcome(BaseModel):
    """One file of a document ingest: added, replaced by a new version, or unchanged."""

    source: str
    status: str  # added | replaced | unchanged
    chunks: int
    pages: int | None = None


class DocumentIngestReport(BaseModel):
    """One `ingest docs` call: every file's outcome and the chunks written."""

    vendor_id: str
    type: str
    round_number: int | None
    documents: list[DocumentOutcome]
    chunks_written: int


class QuestionnaireIngestReport(BaseModel):
    """One stored questionnaire round (CONTRACT.md's ingest questionnaire line)."""

    indexed_count: int
    round_number: int
    vendor_id: str


class VendorStatus(BaseModel):
    """What the store holds for one vendor; only committed documents are counted."""

    vendor_id: str
    documents: int
    chunks: int
    followup_responses: int
    rounds: list[int]
    by_type: dict[str, int]
    incomplete_chunks: int = 0
