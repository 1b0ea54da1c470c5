"""Uploaded files (a name and its bytes, as a browser sends them) ingested as documents or
questionnaire rounds: every file checked before any is written, and a refusal names the file
as it was uploaded, never the temporary folder it passed through."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core.errors import UserInputError
from core.ingest import refuse_too_large, shown_path
from core.ingest.documents import check_document_type
from core.ingest.questionnaire import parse_payload_bytes
from core.models import PayloadLimits, QuestionnairePayload
from core.reports import DocumentIngestReport, Progress, QuestionnaireIngestReport
from core.store import check_vendor_id
from core.workbench import Workbench

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


def ingest_uploaded_documents(workbench: Workbench, vendor_id: str, uploads: Sequence[Upload],
                              doc_type: str, round_number: int | None,
                              progress: Progress | None = None) -> DocumentIngestReport:
    """Ingest uploaded files as documents; a refusal names the file, never a temp folder."""
    if not uploads:
        raise UserInputError("Choose at least one .md, .txt or .pdf file to upload.")
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


def ingest_uploaded_questionnaires(workbench: Workbench, uploads: Sequence[Upload],
                                   progress: Progress | None = None
                                   ) -> list[QuestionnaireIngestReport]:
    """Validate all rounds (and their vendor ids against the store), then write each."""
    payloads = read_questionnaires(uploads,
                                   limits=PayloadLimits.from_settings(workbench.settings))
    return list(workbench.ingest_questionnaires(payloads, progress=progress))
