"""Uploaded files (a name and its bytes, as a browser sends them) ingested as documents or
questionnaire rounds: every file checked before any is written, and a refusal names the file
as it was uploaded, never the temporary folder it passed through."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import MAX_ROUND_NUMBER
from core.errors import UserInputError
from core.ingest import LoadedRound, refuse_too_large, shown_path
from core.ingest.documents import check_document_type
from core.ingest.package import Package, read_package
from core.ingest.rounds.payload import check_batch_vendor_ids, parse_payload_bytes
from core.ingest.rounds.table_round import spreadsheet_round
from core.ingest.rounds.tables import is_spreadsheet
from core.ingest.writer import EvidenceWriter
from core.models import PayloadLimits, QuestionnairePayload
from core.reports import DocumentIngestReport, Progress, QuestionnaireIngestReport
from core.services import EvidenceIngest
from core.store import check_vendor_id

Upload = tuple[str, bytes]  # (file name, content)


def save_uploads(folder: Path, uploads: Sequence[Upload]) -> list[Path]:
    """Write uploads under their own names (no folders), refusing two files of one name."""
    paths: list[Path] = []
    for name, data in uploads:
        clean = Path(name.replace("\\", "/")).name
        if not clean or clean in {".", ".."}:
            raise UserInputError(f"The uploaded file name '{shown_path(name)}' cannot be stored.")
        try:
            encoded = clean.encode("utf-8")
        except UnicodeEncodeError:
            encoded = b""
        if not encoded or shown_path(clean) != clean or len(encoded) > 255:
            raise UserInputError(
                f"The uploaded file name '{shown_path(clean)}' cannot be stored; rename the "
                "file (at most 255 bytes, no control characters).")
        path = folder / clean
        if path in paths:
            raise UserInputError(
                f"Two uploaded files are both named '{clean}'; upload them separately.")
        path.write_bytes(data)
        paths.append(path)
    return paths


def ingest_uploaded_documents(workbench: EvidenceIngest, vendor_id: str, uploads: Sequence[Upload],
                              doc_type: str, round_number: int | None,
                              progress: Progress | None = None) -> DocumentIngestReport:
    """Ingest uploaded files as documents; a refusal names the file, never a temp folder."""
    if not uploads:
        raise UserInputError(
            "Choose at least one .md, .txt, .pdf, .docx, .html or .htm file to upload.")
    check_vendor_id(vendor_id)
    check_document_type(doc_type, round_number)
    limit = workbench.settings.max_document_bytes
    for name, data in uploads:  # refused before anything is copied to disk
        refuse_too_large(shown_path(name), len(data), limit, "a document")
    with tempfile.TemporaryDirectory(prefix="evidence-upload-") as folder:
        try:
            paths = save_uploads(Path(folder), uploads)
            return workbench.ingest_documents(vendor_id, paths, doc_type=doc_type,
                                              round_number=round_number, progress=progress)
        except UserInputError as exc:
            raise UserInputError(str(exc).replace(folder + os.sep, "")) from None


def read_questionnaires(uploads: Sequence[Upload], *, max_responses: int | None = None,
                        limits: PayloadLimits | None = None) -> list[QuestionnairePayload]:
    """Validate every uploaded round before any is written; one sentence on the first fault."""
    if not uploads:
        raise UserInputError("Choose at least one questionnaire .json file to upload.")
    return [parse_payload_bytes(shown_path(name), data, max_responses=max_responses,
                                limits=limits)
            for name, data in uploads]


def ingest_uploaded_questionnaires(workbench: EvidenceIngest, uploads: Sequence[Upload],
                                   progress: Progress | None = None, *, replace: bool = False
                                   ) -> list[QuestionnaireIngestReport]:
    """Validate all rounds (and their vendor ids against the store), then write each; with
    `replace`, the uploads (all of one round) become that round."""
    payloads = read_questionnaires(uploads,
                                   limits=PayloadLimits.from_settings(workbench.settings))
    return list(workbench.ingest_questionnaires(payloads, replace=replace, progress=progress))


@dataclass(frozen=True)
class UploadedRound(LoadedRound):
    """A round read from an upload, with where each response came from, so a reviewer can
    check it before anything is written."""

    sheet: str | None = None  # the worksheet read (an .xlsx upload), else None
    rows: list[int] = field(default_factory=list)  # each response's spreadsheet row, or its
    # position in a JSON round's responses

    @property
    def from_spreadsheet(self) -> bool:
        return is_spreadsheet(self.source)

    def preview(self) -> list[dict[str, Any]]:
        """One row per response: where it is in the file, its criterion, question and answer."""
        return [{"row": row, "criterion": response.criterion_question_text,
                 "question": response.question_text, "answer": response.answer_text}
                for row, response in zip(self.rows, self.payload.responses, strict=True)]


def read_uploaded_rounds(workbench: EvidenceIngest, uploads: Sequence[Upload], *,
                         vendor_id: str | None = None, round_number: int | None = None,
                         timestamp: str | None = None) -> list[UploadedRound]:
    """Read and validate every uploaded round, writing nothing: a JSON round as it is, a .csv
    or .xlsx round under the vendor, round and answer time given (default now). The batch's
    vendor ids are checked against the store as an ingest would check them, so what passes
    here is what the ingest writes."""
    if not uploads:
        raise UserInputError(
            "Choose at least one questionnaire round (.json, .csv or .xlsx) to upload.")
    sheets = [shown_path(name) for name, _ in uploads if is_spreadsheet(name)]
    sheet_vendor, sheet_round = "", 0
    if sheets:
        if vendor_id is None or round_number is None:
            raise UserInputError(f"{sheets[0]} is a spreadsheet round; give the vendor id and "
                                 "the round number its answers belong to.")
        if isinstance(round_number, bool) or not isinstance(round_number, int) or not (
                1 <= round_number <= MAX_ROUND_NUMBER):
            raise UserInputError(f"The round number must be a whole number from 1 to "
                                 f"{MAX_ROUND_NUMBER}, not {round_number!r}.")
        sheet_vendor, sheet_round = check_vendor_id(vendor_id), round_number
    limits = PayloadLimits.from_settings(workbench.settings)
    rounds: list[UploadedRound] = []
    for name, data in uploads:
        shown = shown_path(name)
        if is_spreadsheet(name):
            read = spreadsheet_round(shown, data, vendor_id=sheet_vendor,
                                     round_number=sheet_round, timestamp=timestamp,
                                     limits=limits)
            rounds.append(UploadedRound(read.payload, shown, list(read.notes), sheet=read.sheet,
                                        rows=list(read.rows)))
        else:
            payload = parse_payload_bytes(shown, data, limits=limits)
            rounds.append(UploadedRound(payload, shown,
                                        rows=list(range(1, len(payload.responses) + 1))))
    check_batch_vendor_ids((r.payload.vendor_id for r in rounds), workbench.store,
                           workbench.embedder.name)
    return rounds


def ingest_loaded_rounds(workbench: EvidenceIngest, rounds: Sequence[LoadedRound],
                         progress: Progress | None = None, *, replace: bool = False
                         ) -> list[QuestionnaireIngestReport]:
    """Write rounds already read and validated; every vendor id is checked again against the
    store as it is now before the first round is written, so a refusal leaves nothing. With
    `replace`, the rounds (all of one vendor and round) become that round."""
    if not rounds:
        raise UserInputError("There are no questionnaire rounds to ingest.")
    return list(workbench.ingest_questionnaires([r.payload for r in rounds], replace=replace,
                                                progress=progress))


def read_uploaded_package(writer: EvidenceWriter, vendor_id: str, uploads: Sequence[Upload], *,
                          first_round: int | None = None, timestamp: str | None = None,
                          columns: dict[str, str] | None = None,
                          sheets: dict[str, list[str]] | None = None,
                          progress: Progress | None = None) -> Package:
    """Uploaded files read and sorted as a vendor package, nothing written. Files that cannot
    be read are kept in it as skipped, with why, so a reviewer sees every file; the
    sentences name the files as uploaded, never the temporary folder they passed through."""
    if not uploads:
        raise UserInputError("Choose the files of the vendor's package to upload.")
    limit = max(writer.settings.max_document_bytes, writer.settings.max_questionnaire_bytes)
    for name, data in uploads:  # refused before anything is copied to disk
        refuse_too_large(shown_path(name), len(data), limit, "a file of a package")
    with tempfile.TemporaryDirectory(prefix="evidence-package-") as folder:
        try:
            save_uploads(Path(folder), uploads)
            package = read_package(writer, vendor_id, Path(folder), first_round=first_round,
                                   skip_unreadable=True, timestamp=timestamp,
                                   columns=columns, sheets=sheets, progress=progress)
        except UserInputError as exc:
            message = str(exc).replace(folder + os.sep, "").replace(f"The package {folder} ",
                                                                    "The upload ")
            raise UserInputError(message) from None
    return package
