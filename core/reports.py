"""What the library reports back: per-document and per-round ingest outcomes, vendor status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

# How long work reports how far it got: (stage, done, total), e.g. ("embedding", 64, 300).
Progress = Callable[[str, int, int], None]


class DocumentOutcome(BaseModel):
    """One file of a document ingest: added, replaced by a new version, or unchanged."""

    source: str
    status: str  # added | replaced | unchanged
    chunks: int
    pages: int | None = None
    # A replaced file's earlier version stays readable, superseded (`evidence documents`).
    earlier_version_kept: bool | None = None

    @model_serializer(mode="wrap")
    def _line(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if data.get("earlier_version_kept") is None:
            data.pop("earlier_version_kept", None)
        return data


class SkippedFile(BaseModel):
    """A file left out because it could not be read (`--skip-unreadable`), and why."""

    source: str
    reason: str


class DocumentIngestReport(BaseModel):
    """One `ingest docs` call: every file's outcome and the chunks written. `skipped` (the
    files `--skip-unreadable` left out) is in the line only when a file was skipped."""

    vendor_id: str
    type: str
    round_number: int | None
    documents: list[DocumentOutcome]
    chunks_written: int
    skipped: list[SkippedFile] = []

    @model_serializer(mode="wrap")
    def _contract_line(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if not data.get("skipped"):
            data.pop("skipped", None)
        return data


class QuestionnaireIngestReport(BaseModel):
    """One stored questionnaire round (CONTRACT.md's ingest questionnaire line).

    `removed_count` is set only by a replacement of the round (`--replace`): the answers it
    removed from the round. A plain ingest leaves it None, and its dump is exactly the three
    keys of the contract's line."""

    indexed_count: int
    round_number: int
    vendor_id: str
    removed_count: int | None = None

    @model_serializer(mode="wrap")
    def _contract_line(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if data.get("removed_count") is None:
            data.pop("removed_count", None)
        return data


class VendorStatus(BaseModel):
    """What the store holds for one vendor; only committed documents are counted."""

    vendor_id: str
    documents: int
    chunks: int
    # Earlier versions of files sent again, kept readable as superseded (not in `documents`).
    earlier_versions: int = 0
    followup_responses: int
    rounds: list[int]
    by_type: dict[str, int]
    incomplete_chunks: int = 0
