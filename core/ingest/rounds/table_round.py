"""A questionnaire round read from a spreadsheet (.csv, .xlsx): a standard questionnaire by its
layout, a table of any other layout by `--columns`, and any other table by its criterion,
question and answer headers.

The round becomes the same bulk payload as a JSON round and passes the same validation, so
every rule of a JSON round holds; a refusal names the file, sheet, row and column the user
can go and fix."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import UserInputError
from core.hashing import content_hash
from core.ingest import read_user_file, refuse_too_large, shown_path
from core.ingest.rounds.answers import LayoutRead
from core.ingest.rounds.headed_tables import read_table
from core.ingest.rounds.headers import TableColumns, TableRow, TableSpec
from core.ingest.rounds.layouts import read_layout, recognise
from core.ingest.rounds.mapping import ColumnMapping, read_mapped
from core.ingest.rounds.payload import first_error, parse_payload
from core.ingest.rounds.tables import (
    DELIMITERS,
    HEADER_SEARCH_ROWS,
    Grid,
    Rows,
    check_workbook_zip,
    csv_error,
    csv_records,
    decode_csv,
    is_spreadsheet,
    read_workbook,
)
from core.models import PayloadLimits, QuestionnairePayload

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

    def preview(self) -> list[dict[str, Any]]:
        """One row per response, for people to check before the round is ingested."""
        return [{**({"id": response.questionnaire_id} if self.ids else {}), "row": row,
                 "criterion": response.criterion_question_text,
                 "question": response.question_text, "answer": response.answer_text}
                for row, response in zip(self.rows, self.payload.responses, strict=True)]


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


def _standard_layout(name: str, data: bytes) -> LayoutRead | None:
    """The answers of a standard questionnaire (CAIQ, HECVAT, SIG export, statement of
    applicability), or None for any other table. The first rows of each visible sheet are
    streamed to recognise a layout; only a workbook that has one is loaded whole (twice:
    its formulas, and the values stored with them)."""
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
                    return found
            return None
        check_workbook_zip(name, data)
        streamed = read_workbook(name, data, read_only=True, data_only=True)
        try:
            heads = [Rows(sheet.title, list(islice(sheet.iter_rows(values_only=True),
                                                   HEADER_SEARCH_ROWS)))
                     for sheet in streamed.worksheets if sheet.sheet_state == "visible"]
        finally:
            streamed.close()
        recognised = recognise(heads)
        if recognised is None:
            return None
        formulas = read_workbook(name, data, read_only=False)
        values = read_workbook(name, data, read_only=False, data_only=True)
        grids = [Grid(formulas[sheet.title], sheet) for sheet in values.worksheets
                 if sheet.sheet_state == "visible"]
        return read_layout(grids, [recognised[0]])
    except UserInputError as exc:
        message = str(exc)
        if not message.startswith(name):  # the layout reader names the sheet, not the file
            raise UserInputError(f"{name}, {message}") from None
        raise


def _mapped_table(name: str, data: bytes, mapping: ColumnMapping) -> LayoutRead:
    """A table of any layout read by `--columns`: a CSV file, or the sheet of a workbook
    that holds the named headers (the only visible sheet, or one named Answers, when the
    mapping gives letters alone)."""
    label = f"a table mapped by --columns {mapping.shown()}"
    try:
        if Path(name).suffix.lower() == ".csv":
            text = decode_csv(name, data)
            delimiter = max(DELIMITERS, key=lambda d: text.split("\n", 1)[0].count(d))
            try:
                rows = list(csv_records(text, delimiter))
            except csv.Error as exc:
                raise csv_error(name, 1, exc) from None
            return read_mapped(Rows("", rows), mapping, label)
        check_workbook_zip(name, data)
        formulas = read_workbook(name, data, read_only=False)
        values = read_workbook(name, data, read_only=False, data_only=True)
        grids = [Grid(formulas[sheet.title], sheet) for sheet in values.worksheets
                 if sheet.sheet_state == "visible"]
        if not grids:
            raise UserInputError(f"{name} has no visible worksheet.")
        named = [g for g in grids if g.title.strip().lower() == "answers"]
        candidates = named or grids
        problems = []
        for grid in candidates:
            try:
                return read_mapped(grid, mapping, label)
            except UserInputError as exc:
                problems.append(str(exc))
        raise UserInputError(problems[0] if len(candidates) == 1 else
                             f"no sheet ({', '.join(g.title for g in candidates)}) holds the "
                             f"columns --columns names: {problems[0]}")
    except UserInputError as exc:
        message = str(exc)
        if not message.startswith(name):  # the layout reader names the sheet, not the file
            raise UserInputError(f"{name}, {message}") from None
        raise


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
                                  "extras": answer.extras}}
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
    where = f"sheet(s) {', '.join(sheets)}" if sheets else "the file"
    notes = [f"Read as {found.name}: {len(found.answers):,} answers from {where}; {linked}.",
             *found.notes]
    return SpreadsheetRound(payload=validated, sheet=", ".join(sheets) or None,
                            rows=[a.row or index for index, a in enumerate(found.answers, 1)],
                            notes=notes,
                            layout=found.name,
                            ids=[a.questionnaire_id for a in found.answers])


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
                      columns: ColumnMapping | None = None) -> SpreadsheetRound:
    """Read one round from a .csv or .xlsx file's bytes and validate it as a JSON round is
    validated; a refusal names the file, sheet, row and column. A standard questionnaire
    (CAIQ, HECVAT, SIG export, statement of applicability) is read by its layout, a table
    of any other layout by a column mapping (`--columns`)."""
    refuse_too_large(name, len(data), limits.max_bytes, "a questionnaire round")
    if columns is not None:
        return layout_round(name, _mapped_table(name, data, columns), vendor_id=vendor_id,
                             round_number=round_number, timestamp=timestamp, limits=limits)
    found = _standard_layout(name, data) if is_spreadsheet(name) else None
    if found is not None:
        return layout_round(name, found, vendor_id=vendor_id, round_number=round_number,
                             timestamp=timestamp, limits=limits)
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
                           columns: ColumnMapping | None = None) -> SpreadsheetRound:
    """Read one round from a .csv or .xlsx file on disk; an oversized file is refused unread."""
    raw = read_user_file(Path(path), max_bytes=limits.max_bytes, what="a questionnaire round")
    return spreadsheet_round(shown_path(path), raw, vendor_id=vendor_id,
                             round_number=round_number, timestamp=timestamp, limits=limits,
                             columns=columns)
