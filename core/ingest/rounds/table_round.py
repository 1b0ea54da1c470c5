"""A questionnaire round read from a spreadsheet (.csv, .xlsx): a standard questionnaire by its
layout, a table of any other layout by `--columns`, and any other table by its criterion,
question and answer headers.

The round becomes the same bulk payload as a JSON round and passes the same validation, so
every rule of a JSON round holds; a refusal names the file, sheet, row and column the user
can go and fix."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from core.errors import UserInputError
from core.hashing import content_hash
from core.ingest import read_user_file, refuse_too_large, shown_path
from core.ingest.rounds.answers import LayoutRead
from core.ingest.rounds.guess import NO_ID_COLUMN
from core.ingest.rounds.headed_tables import read_table
from core.ingest.rounds.headers import TableColumns, TableRow, TableSpec
from core.ingest.rounds.layouts import read_layout, recognise
from core.ingest.rounds.mapped_tables import (
    guessed_table,
    is_headed,
    mapped_table,
    no_guess_reason,
    sheet_grids,
)
from core.ingest.rounds.mapping import ColumnMapping
from core.ingest.rounds.payload import first_error, parse_payload
from core.ingest.rounds.tables import (
    DELIMITERS,
    HEADER_SEARCH_ROWS,
    Grid,
    Rows,
    check_workbook_zip,
    csv_records,
    decode_csv,
    is_spreadsheet,
    read_workbook,
)
from core.models import PayloadLimits, QuestionnairePayload

T = TypeVar("T")

# A standard questionnaire is one round however many questions it answers (the SIG Core has
# about 1,000); the round's answers are committed in one store write, which takes 5,461.
MAX_WORKBOOK_RESPONSES = 5_000


def current_timestamp() -> str:
    """The current UTC time in ISO 8601 to the second, as a round's timestamp."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SpreadsheetRound:
    """A round read from a spreadsheet, validated and ready to ingest: nothing is written."""

    payload: QuestionnairePayload
    sheet: str | None  # None for a CSV file
    rows: list[int]  # the spreadsheet row of each response, as Excel numbers it
    notes: list[str]  # one sentence each: what was read differently from the cell as shown
    layout: str | None = None  # "CAIQ v4.0.3" for a standard questionnaire
    ids: list[str] | None = None  # each response's question id, for a standard one
    sheets_read: list[str] = dataclass_field(default_factory=list)
    left_out: list[tuple[str, str]] = dataclass_field(default_factory=list)  # (sheet, why)

    def preview(self) -> list[dict[str, Any]]:
        """One row per response, for people to check before the round is ingested."""
        return [{**({"id": response.questionnaire_id} if self.ids else {}),
                 **({"sheet": response.origin.sheet} if response.origin is not None
                    and response.origin.sheet and len(self.sheets_read) > 1 else {}),
                 "row": row, "criterion": response.criterion_question_text,
                 "question": response.question_text, "answer": response.answer_text}
                for row, response in zip(self.rows, self.payload.responses, strict=True)]

    def sheets(self) -> dict[str, Any] | None:
        """The sheets read and those left out (with why), for a workbook; None for a CSV."""
        if not self.sheets_read and not self.left_out:
            return None
        return {"read": self.sheets_read,
                "left_out": [{"sheet": sheet, "why": why} for sheet, why in self.left_out]}


def _round_too_many(where: str, count: int, first: int, last: int, most: int) -> str:
    return (f"{where} holds {count:,} responses (rows {first:,} to {last:,}); a spreadsheet "
            f"round may hold at most {most:,} (the answers are committed in one write): split "
            "it into several files, which accumulate in the round.")


_ROUND_SPEC = TableSpec(
    what="a questionnaire round",
    fields={"criterion": ("criterion", "criterion question text"),
            "question": ("question", "question text"),
            "answer": ("answer", "answer text")},
    required=("criterion", "question", "answer"),
    sheet_names=("answers",),
    max_rows=MAX_WORKBOOK_RESPONSES,
    too_many=_round_too_many,
)


_PAYLOAD_FIELDS = {"criterion_question_text": "criterion", "question_text": "question",
                   "answer_text": "answer"}
_OPTIONS = {"vendor_id": "--vendor", "round_number": "--round", "timestamp": "--timestamp"}


def _standard_layout(name: str, data: bytes, sheets: Sequence[str] = ()
                     ) -> tuple[LayoutRead | None, list[Rows] | None]:
    """The answers of a standard questionnaire (CAIQ, HECVAT, SIG export, statement of
    applicability), or None for any other table; and for a workbook, the first rows of each
    sheet offered, streamed to recognise a layout (the other readers look at them too). Only
    a workbook that has a layout is loaded whole (twice: its formulas, and the values stored
    with them)."""
    try:
        if Path(name).suffix.lower() == ".csv":
            text = decode_csv(name, data)
            for delimiter in DELIMITERS:
                try:
                    rows = list(csv_records(text, delimiter))
                except csv.Error:
                    continue
                found = read_layout([Rows("", rows)])
                if found is not None:
                    return found, None
            return None, None
        check_workbook_zip(name, data)
        streamed = read_workbook(name, data, read_only=True, data_only=True)
        try:
            heads = [Rows(sheet.title, list(islice(sheet.iter_rows(values_only=True),
                                                   HEADER_SEARCH_ROWS)))
                     for sheet in streamed.worksheets if _offered(sheet, sheets)]
        finally:
            streamed.close()
        recognised = recognise(heads)
        if recognised is None:
            return None, heads
        formulas = read_workbook(name, data, read_only=False)
        values = read_workbook(name, data, read_only=False, data_only=True)
        grids = [Grid(formulas[sheet.title], sheet) for sheet in values.worksheets
                 if _offered(sheet, sheets)]
        found = read_layout(grids, [recognised[0]])
        if found is not None:
            left = [(sheet.title, "hidden" if sheet.sheet_state != "visible" and not sheets
                     else "not chosen with --sheet" if sheets and sheet.title not in sheets
                     else f"no {found.name} header")
                    for sheet in values.worksheets if sheet.title not in found.sheets]
            found = replace(found, left_out=left)
        return found, heads
    except UserInputError as exc:
        message = str(exc)
        if not message.startswith(name):  # the layout reader names the sheet, not the file
            raise UserInputError(f"{name}, {message}") from None
        raise


_PAGE = re.compile(r"^page (\d+)$")


def pages_text(sheets: Sequence[str]) -> str:
    """'pages 4 to 74' for the pages of a PDF a questionnaire was read from."""
    numbers = sorted(int(_PAGE.match(s).group(1)) for s in sheets)  # type: ignore[union-attr]
    return (f"page {numbers[0]}" if len(numbers) == 1 else
            f"pages {numbers[0]} to {numbers[-1]}")


def _offered(sheet: Any, sheets: Sequence[str]) -> bool:
    """A sheet a reader looks at: one --sheet chose, else a visible one."""
    return sheet.title in sheets if sheets else sheet.sheet_state == "visible"


def layout_round(name: str, found: LayoutRead, *, vendor_id: str, round_number: int,
                  timestamp: str | None, limits: PayloadLimits) -> SpreadsheetRound:
    """A standard questionnaire's answers as one round: each answer's linked criterion is
    its question, and it keeps its question id, file, sheet, row and the layout's other
    columns."""
    if not found.answers:
        raise UserInputError(
            f"{name} is a {found.name} workbook with no answered question (sheet(s) "
            f"{', '.join(found.sheets)}); fill in the vendor's answers first.")
    file = Path(name).name
    csv_file = Path(name).suffix.lower() == ".csv"
    payload = {
        "vendor_id": vendor_id,
        "round_number": round_number,
        "timestamp": current_timestamp() if timestamp is None else timestamp,
        "responses": [{"criterion_question_text": answer.criterion or answer.question,
                       "question_text": answer.question,
                       "answer_text": answer.answer,
                       "questionnaire_id": answer.questionnaire_id or None,
                       "origin": {"file": file,
                                  "sheet": None if csv_file else answer.sheet or None,
                                  "row": answer.row or None, "layout": found.name,
                                  "extras": answer.extras, "by_sheet": answer.by_sheet}}
                      for answer in found.answers],
    }
    where = f"{name} ({found.name})"
    workbook_limits = replace(limits, max_responses=MAX_WORKBOOK_RESPONSES)
    try:
        validated = parse_payload(payload, where=where, limits=workbook_limits)
    except UserInputError as exc:
        cause = exc.__context__
        if isinstance(cause, ValidationError):
            raise UserInputError(_translate_layout(cause, name, found, payload)) from None
        raise
    linked = ("each answer's criterion is its question" if not any(a.criterion for a in
              found.answers) else "each answer's criterion is the criterion column's text, "
              "or its question where that is blank")
    sheets = [sheet for sheet in found.sheets if sheet]
    where = (pages_text(sheets) if sheets and all(_PAGE.match(s) for s in sheets)
             else f"sheet(s) {', '.join(sheets)}" if sheets else "the file")
    read_as = found.name if found.guessed is None else "the guessed layout"
    notes = [f"Read as {read_as}: {len(found.answers):,} answers from {where}; {linked}.",
             *found.notes]
    return SpreadsheetRound(payload=validated, sheet=", ".join(sheets) or None,
                            rows=[a.row or index for index, a in enumerate(found.answers, 1)],
                            notes=notes,
                            layout=found.name,
                            ids=[a.questionnaire_id for a in found.answers],
                            sheets_read=sheets, left_out=list(found.left_out))


def _headed(name: str, data: bytes, sheets: Sequence[str], heads: list[Rows] | None) -> bool:
    """Whether the table is read by its criterion, question and answer headers rather than
    guessed: decided on a workbook's streamed first rows where they hold each sheet's first
    non-blank row; else (a CSV file, a sheet blank that far down) on the whole table. A
    table with nothing to look at goes to the headed reader, which says why."""
    if heads is not None and (is_headed(heads, _ROUND_SPEC) or all(
            any(head.text_or_blank(row, column) for row in range(1, head.max_row + 1)
                for column in range(1, head.max_column + 1)) for head in heads)):
        return is_headed(heads, _ROUND_SPEC)
    grids, _others = _grids(name, data, sheets)
    return not grids or is_headed(grids, _ROUND_SPEC)


def _grids(name: str, data: bytes, sheets: Sequence[str]
           ) -> tuple[list[Rows], list[tuple[str, str]]]:
    """The sheets a mapped or guessed table is read from, and the others with why."""
    grids, others = _named(name, lambda: sheet_grids(name, data, sheets))
    return grids, [(title, "not chosen with --sheet" if sheets else "hidden")
                   for title in others]


def _named(name: str, read: Callable[[], T]) -> T:
    """`read()`, its refusal naming the file (a sheet reader names only the sheet)."""
    try:
        return read()
    except UserInputError as exc:
        message = str(exc)
        if not message.startswith(name):
            raise UserInputError(f"{name}, {message}") from None
        raise


def _translate_layout(exc: ValidationError, name: str, found: LayoutRead,
                      payload: dict[str, Any]) -> str:
    """A validation error of a standard questionnaire's answer as a sentence naming its
    sheet, row and question id."""
    error = exc.errors()[0]
    loc = error["loc"]
    message = first_error(exc)
    if len(loc) >= 3 and loc[0] == "responses" and isinstance(loc[1], int):
        answer = found.answers[loc[1]]
        field = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
                        for i, p in enumerate(loc))
        what = {"question_text": "question", "criterion_question_text": "question",
                "answer_text": "answer"}.get(str(loc[2]), str(loc[2]))
        return (f"{name}, sheet {answer.sheet}, row {answer.row} ({answer.questionnaire_id}): "
                f"the {what} {message.removeprefix(f'field {field} ')}")
    return f"{name}: {message}"


def spreadsheet_round(name: str, data: bytes, *, vendor_id: str, round_number: int,
                      timestamp: str | None, limits: PayloadLimits,
                      columns: ColumnMapping | None = None,
                      sheets: Sequence[str] = ()) -> SpreadsheetRound:
    """Read one round from a .csv or .xlsx file's bytes and validate it as a JSON round is
    validated; a refusal names the file, sheet, row and column. A standard questionnaire
    (CAIQ, HECVAT, SIG export, statement of applicability) is read by its layout, a table
    of any other layout by a column mapping (`--columns`), a table headed criterion,
    question and answer by those headers, and any other by a guessed mapping where the guess
    is confident. `sheets` (--sheet) chooses the sheets a workbook is read from."""
    refuse_too_large(name, len(data), limits.max_bytes, "a questionnaire round")
    kwargs: dict[str, Any] = {"vendor_id": vendor_id, "round_number": round_number,
                              "timestamp": timestamp, "limits": limits}
    if columns is not None:
        grids, others = _grids(name, data, sheets)
        return layout_round(name, _named(name, lambda: mapped_table(
            name, grids, columns, chosen=bool(sheets), others=others)), **kwargs)
    found, heads = _standard_layout(name, data, sheets) if is_spreadsheet(name) else (None, None)
    if found is not None:
        return layout_round(name, found, **kwargs)
    if is_spreadsheet(name) and not _headed(name, data, sheets, heads):
        grids, others = _grids(name, data, sheets)
        guessed = _named(name, lambda: guessed_table(name, grids, others))
        if isinstance(guessed, LayoutRead):
            return layout_round(name, guessed, **kwargs)
        # Ids found but no confident mapping: the refusal says what the guess lacked.
        near = [g for g in guessed if not g.why.startswith(NO_ID_COLUMN)]
        if near:
            try:
                read_table(name, data, _ROUND_SPEC, [])
            except UserInputError as exc:
                raise UserInputError(f"{str(exc).removesuffix('.')}; its layout could not be "
                                     f"guessed ({no_guess_reason(near)}).") from None
    notes: list[str] = []
    spec = _ROUND_SPEC
    sheet, layout, rows = read_table(name, data, spec, notes)
    seen: dict[str, int] = {}
    for row in rows:
        for field in ("question", "answer"):
            if row.cells[field] is None:
                raise UserInputError(f"{layout.place(row.number, field)}: the {field} is blank.")
        key = content_hash(row.cells["criterion"], row.cells["question"] or "")
        if key in seen:
            raise UserInputError(
                f"{layout.place(row.number, 'question')}: row {row.number} repeats the "
                f"criterion and question of row {seen[key]}; each question may appear once "
                "in a round.")
        seen[key] = row.number
    payload = {
        "vendor_id": vendor_id,
        "round_number": round_number,
        "timestamp": current_timestamp() if timestamp is None else timestamp,
        "responses": [{"criterion_question_text": row.cells["criterion"],
                       "question_text": row.cells["question"],
                       "answer_text": row.cells["answer"]} for row in rows],
    }
    try:
        validated = parse_payload(payload, where=layout.where,
                                  limits=replace(limits, max_responses=MAX_WORKBOOK_RESPONSES))
    except UserInputError as exc:
        # parse_payload refuses in terms of the JSON fields; the ValidationError it came from
        # says which response and field, so the sentence can name the row and column instead.
        cause = exc.__context__
        if isinstance(cause, ValidationError):
            raise UserInputError(_translate(cause, layout, rows, payload)) from None
        raise
    return SpreadsheetRound(payload=validated, sheet=sheet, rows=[row.number for row in rows],
                            notes=notes)


def _translate(exc: ValidationError, layout: TableColumns, rows: list[TableRow],
               payload: dict[str, Any]) -> str:
    """The payload's first error as a sentence about the option or the cell it came from."""
    error = exc.errors()[0]
    loc = error["loc"]
    message = first_error(exc)
    field = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
                    for i, p in enumerate(loc))
    rest = message.removeprefix(f"field {field} ")
    if len(loc) == 1 and loc[0] in _OPTIONS:
        value = payload[str(loc[0])]
        shown = (f" '{shown_path(value)}'" if error["type"] == "value_error"
                 and isinstance(value, str) else "")
        return f"{_OPTIONS[str(loc[0])]}{shown} {rest}"
    if (len(loc) == 3 and loc[0] == "responses" and isinstance(loc[1], int)
            and loc[2] in _PAYLOAD_FIELDS):
        what = _PAYLOAD_FIELDS[str(loc[2])]
        return f"{layout.place(rows[loc[1]].number, what)}: the {what} {rest}"
    return f"{layout.where}: {message}"


def load_spreadsheet_round(path: Path | str, *, vendor_id: str, round_number: int,
                           timestamp: str | None, limits: PayloadLimits,
                           columns: ColumnMapping | None = None,
                           sheets: Sequence[str] = ()) -> SpreadsheetRound:
    """Read one round from a .csv or .xlsx file on disk; an oversized file is refused unread."""
    raw = read_user_file(Path(path), max_bytes=limits.max_bytes, what="a questionnaire round")
    return spreadsheet_round(shown_path(path), raw, vendor_id=vendor_id,
                             round_number=round_number, timestamp=timestamp, limits=limits,
                             columns=columns, sheets=sheets)
