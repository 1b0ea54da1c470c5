"""The next questionnaire round, drafted for a vendor to fill in.

One row per criterion: the criterion text exactly as the reviewer keeps it (the answer links
to it by its hash), the question put to the vendor, and an empty answer. Once answered, the
file ingests as a round (core.ingest.rounds.table_round for .xlsx and .csv, the JSON path
for .json)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.styles import Alignment, Font
from openpyxl.utils import get_column_letter
from pydantic import BaseModel, Field

from core.config import MAX_ROUND_NUMBER
from core.criteria import CriterionEntry, check_criterion, check_question
from core.errors import UserInputError, shown_path
from core.hashing import criterion_hash
from core.ingest.rounds.table_round import current_timestamp
from core.store import check_vendor_id

if TYPE_CHECKING:
    from core.services import EvidenceReader

DraftFormat = Literal["xlsx", "csv", "json"]
DRAFT_FORMATS: dict[str, DraftFormat] = {".xlsx": "xlsx", ".csv": "csv", ".json": "json"}

# Column header and width (in characters) of the answer sheet.
_COLUMNS = {"id": ("ID", 14), "criterion": ("Criterion", 60), "question": ("Question", 60),
            "answer": ("Answer", 80)}


class DraftRow(BaseModel):
    """One criterion of the next round: what is asked, and which rounds already answered it."""

    id: str | None = None
    criterion: str
    criterion_hash: str
    question: str = Field(description="the question put to the vendor: the criterion text "
                                      "unless the reviewer edited it")
    answered_rounds: list[int] = Field(
        default_factory=list,
        description="rounds with an answer linked to this criterion in the vendor's store")
    answer: str = ""


def plan_draft(workbench: EvidenceReader, vendor_id: str, criteria: Sequence[CriterionEntry], *,
               only_unanswered: bool = False, only_open: bool = False) -> list[DraftRow]:
    """One row per distinct criterion (by criterion hash), with the rounds that answered it;
    with only_unanswered, the criteria no round has answered yet; with only_open, the
    criteria whose current reviewer decision is not met (the gap-only round)."""
    workbench.store.open_vendor(vendor_id)  # an unknown vendor is refused as every read is
    if not criteria:
        raise UserInputError("There are no criteria to draft a round for.")
    rows: dict[str, DraftRow] = {}
    for entry in criteria:
        text = check_criterion(entry.text)
        key = criterion_hash(text)
        if key in rows:
            continue
        edited = entry.question is not None and entry.question.strip()
        question = check_question(entry.question) if edited else text
        linked = workbench.linked_followups(vendor_id, text)
        rows[key] = DraftRow(id=entry.id, criterion=text, criterion_hash=key,
                             question=question,
                             answered_rounds=sorted({hit.round_number for hit in linked}))
    drafted = list(rows.values())
    if only_open:
        from core.review.decisions import DecisionLog

        latest = {d.criterion_hash: d.status
                  for d in DecisionLog(workbench.store, vendor_id).all()}
        drafted = [row for row in drafted if latest.get(row.criterion_hash) != "met"]
        if not drafted:
            raise UserInputError(
                f"Every criterion given is decided met for vendor '{vendor_id}'; draft "
                "without --only-open to ask again.")
    if only_unanswered:
        drafted = [row for row in drafted if not row.answered_rounds]
        if not drafted:
            raise UserInputError(
                f"Every criterion given already has a linked answer from vendor '{vendor_id}'; "
                "draft without --only-unanswered to ask again.")
    return drafted


def draft_format(path: Path | str) -> DraftFormat:
    """The format a draft is written in, from the output file's ending."""
    suffix = Path(str(path)).suffix.lower()
    if suffix not in DRAFT_FORMATS:
        raise UserInputError(
            f"{shown_path(path)}: a draft is written as .xlsx, .csv or .json; name the output "
            "file with one of these endings.")
    return DRAFT_FORMATS[suffix]


def write_draft(rows: Sequence[DraftRow], *, vendor_id: str, round_number: int,
                fmt: str) -> bytes:
    """The draft file's bytes: an .xlsx workbook, a CSV file Excel opens as UTF-8, or the
    bulk JSON payload with empty answers."""
    check_vendor_id(vendor_id)
    if isinstance(round_number, bool) or not isinstance(round_number, int):
        raise UserInputError(f"--round must be a whole number, not {round_number!r}.")
    if not 1 <= round_number <= MAX_ROUND_NUMBER:
        raise UserInputError(
            f"--round must be between 1 and {MAX_ROUND_NUMBER}, not {round_number}.")
    if not rows:
        raise UserInputError("A draft needs at least one criterion.")
    if fmt == "xlsx":
        return _xlsx(rows, vendor_id, round_number)
    if fmt == "csv":
        return _csv(rows)
    if fmt == "json":
        return _json(rows, vendor_id, round_number)
    raise UserInputError(f"A draft is written as xlsx, csv or json, not {fmt!r}.")


def _fields(rows: Sequence[DraftRow]) -> list[str]:
    with_id = any(row.id for row in rows)
    return [f for f in _COLUMNS if f != "id" or with_id]


def _cells(row: DraftRow, fields: list[str]) -> list[str]:
    return [getattr(row, field) or "" for field in fields]


def _xlsx(rows: Sequence[DraftRow], vendor_id: str, round_number: int) -> bytes:
    fields = _fields(rows)
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Answers"
    wrap = Alignment(wrap_text=True, vertical="top")
    sheet.append([_COLUMNS[f][0] for f in fields])
    for cell in sheet[1]:
        cell.font = Font(bold=True)
        cell.alignment = wrap
    for number, row in enumerate(rows, start=2):
        for column, text in enumerate(_cells(row, fields), start=1):
            illegal = ILLEGAL_CHARACTERS_RE.search(text)
            if illegal:
                raise UserInputError(
                    f"The {_COLUMNS[fields[column - 1]][0].lower()} of row {number} holds the "
                    f"control character \\x{ord(illegal[0]):02x}, which a workbook cannot "
                    "hold; draft it as .csv or .json, or remove the character.")
            cell = sheet.cell(row=number, column=column, value=text or None)
            if text:
                cell.data_type = "s"  # text, even where it starts with "=" like a formula
            cell.alignment = wrap
    for column, field in enumerate(fields, start=1):
        sheet.column_dimensions[get_column_letter(column)].width = _COLUMNS[field][1]
    sheet.freeze_panes = "A2"

    notes = workbook.create_sheet("Instructions")
    answer = get_column_letter(fields.index("answer") + 1)
    criterion = get_column_letter(fields.index("criterion") + 1)
    for line in [
        f"Follow-up questionnaire for vendor {vendor_id}, round {round_number}",
        "",
        f"Answer each question in the Answer column (column {answer}) of the sheet Answers, "
        "one answer per row.",
        f"Do not edit the Criterion column (column {criterion}): your answer is linked to the "
        "criterion by its exact text.",
        "Do not merge cells, and type answers as text (no formulas); leave the header row as "
        "it is.",
        "Every row needs an answer before the file can be submitted.",
    ]:
        notes.append([line])
    notes["A1"].font = Font(bold=True)
    notes.column_dimensions["A"].width = 110
    for cell in notes["A"]:
        cell.alignment = Alignment(wrap_text=True, vertical="top")
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _csv(rows: Sequence[DraftRow]) -> bytes:
    fields = _fields(rows)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([_COLUMNS[f][0] for f in fields])
    writer.writerows(_cells(row, fields) for row in rows)
    return buffer.getvalue().encode("utf-8-sig")  # the BOM makes Excel read it as UTF-8


def _json(rows: Sequence[DraftRow], vendor_id: str, round_number: int) -> bytes:
    payload = {
        "vendor_id": vendor_id,
        "round_number": round_number,
        "timestamp": current_timestamp(),
        "responses": [{"criterion_question_text": row.criterion,
                       "question_text": row.question,
                       "answer_text": row.answer} for row in rows],
    }
    return (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
