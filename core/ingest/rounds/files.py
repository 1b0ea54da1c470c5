"""Round files read and validated before anything is written: JSON payloads as they are, .csv
and .xlsx spreadsheets, questionnaires printed in a PDF or published as a web page, VSAQ
answer files, and control implementation statements (OpenControl, OSCAL) under the vendor,
round and time given for them; the statement files of one system make one round."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from core.errors import UserInputError, shown_path
from core.ingest import LoadedRound, read_user_file
from core.ingest.rounds.control_statements import (
    questionnaire_groups,
    statement_kind,
    statement_round,
)
from core.ingest.rounds.mapping import ColumnMapping
from core.ingest.rounds.payload import load_payload_file
from core.ingest.rounds.pdf_tables import read_pdf_questionnaire
from core.ingest.rounds.table_round import (
    SpreadsheetRound,
    layout_round,
    load_spreadsheet_round,
)
from core.ingest.rounds.tables import is_spreadsheet
from core.ingest.rounds.vsaq import read_answers, read_vsaq
from core.ingest.rounds.web_pages import is_web_page, page_text, read_page_questionnaire
from core.models import PayloadLimits, QuestionnairePayload


def load_json_rounds(files: Iterable[Path | str], limits: PayloadLimits
                     ) -> list[QuestionnairePayload]:
    """Every JSON round validated before any is written."""
    return [load_payload_file(Path(f), limits=limits) for f in files]


def _is_pdf(file: Path) -> bool:
    return file.suffix.lower() == ".pdf"


def _pdf_round(file: Path, limits: PayloadLimits, **given: Any) -> SpreadsheetRound:
    """A questionnaire published as a PDF, read as a round; a PDF that is not one (or whose
    table cannot be read) is refused in one sentence that says how to ingest it instead."""
    name = shown_path(file)
    data = read_user_file(file, max_bytes=limits.max_bytes, what="a questionnaire round")
    found = read_pdf_questionnaire(name, data)
    if found.read is None:
        what = ("looks like a questionnaire, but its table cannot be read" if found.looks_like
                else "holds no questionnaire's table")
        raise UserInputError(
            f"{name} {what} ({found.reason}); ingest it as a document with `evidence ingest "
            "docs`, or ask the vendor for the questionnaire as an .xlsx workbook.")
    return layout_round(name, found.read, limits=limits, **given)


def _page_round(file: Path, limits: PayloadLimits, **given: Any) -> SpreadsheetRound:
    """A questionnaire published as a web page (Markdown or HTML), read as a round; a page
    that holds none is refused in one sentence that says how to ingest it instead."""
    name = shown_path(file)
    data = read_user_file(file, max_bytes=limits.max_bytes, what="a questionnaire round")
    found = read_page_questionnaire(name, page_text(file, data))
    if found.read is None:
        raise UserInputError(
            f"{name} holds no questionnaire answers keyed by question ids ({found.reason}); "
            "ingest it as a document with `evidence ingest docs`.")
    return layout_round(name, found.read, limits=limits, **given)


def load_rounds(files: Iterable[Path | str], limits: PayloadLimits, *,
                vendor_id: str | None = None, round_number: int | None = None,
                timestamp: str | None = None, columns: str | None = None,
                sheets: Sequence[str] = ()) -> list[LoadedRound]:
    """Every round file validated before any is written; the vendor, round, time, column
    mapping and sheets apply to spreadsheets, and are refused for JSON rounds, which name
    their own."""
    files = [Path(f) for f in files]
    vsaq = {f: answers for f in files if not is_spreadsheet(f)
            for answers in [read_answers(f)] if answers is not None}
    systems = questionnaire_groups([f for f in files if f not in vsaq], limits)
    tables = [f for f in files if is_spreadsheet(f) or f in vsaq or _is_pdf(f)
              or is_web_page(f) or f in systems]
    mapping = ColumnMapping.parse(columns) if columns is not None else None
    given = [option for option, value in (("--vendor", vendor_id), ("--round", round_number),
                                          ("--timestamp", timestamp), ("--columns", columns),
                                          ("--sheet", list(sheets) or None))
             if value is not None]
    if not tables and given:
        raise UserInputError(
            f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to "
            ".csv and .xlsx rounds, questionnaires in a PDF or a web page (.md, .html), "
            "VSAQ answer files and control implementation statements (OpenControl, OSCAL); "
            "a JSON round names its own vendor, round and time.")
    if tables and (vendor_id is None or round_number is None):
        what = ("a VSAQ answers file" if tables[0] in vsaq else "a questionnaire in a PDF"
                if _is_pdf(tables[0]) else "a questionnaire published as a web page"
                if is_web_page(tables[0]) else statement_kind(systems[tables[0]], tables[0])
                if tables[0] in systems else "a spreadsheet round")
        raise UserInputError(
            f"{shown_path(tables[0])} is {what}; give --vendor and --round "
            "for it (and --timestamp for when it was answered, default now).")
    rounds = []
    read_systems: list[int] = []
    for file in files:
        if file in systems:
            group = systems[file]
            if id(group) in read_systems:
                continue  # read with the first file of its system
            read_systems.append(id(group))
            if columns is not None or sheets:
                raise UserInputError(f"{shown_path(file)} holds control implementation "
                                     "statements, not a .csv or .xlsx table; --columns and "
                                     "--sheet apply only to one.")
            read = statement_round(group, vendor_id=vendor_id, round_number=round_number,
                                   timestamp=timestamp, limits=limits)
            named = [shown_path(f) for f, g in systems.items() if g is group]
            rounds.append(LoadedRound(read.payload, ", ".join(named), list(read.notes),
                                      layout=read.layout, first_answers=read.preview()))
        elif is_spreadsheet(file):
            read = load_spreadsheet_round(file, vendor_id=vendor_id, round_number=round_number,
                                          timestamp=timestamp, limits=limits, columns=mapping,
                                          sheets=sheets)
            rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes),
                                      layout=read.layout or "criterion, question, answer table",
                                      first_answers=read.preview(), sheets=read.sheets()))
        elif _is_pdf(file):
            read = _pdf_round(file, limits, vendor_id=vendor_id, round_number=round_number,
                              timestamp=timestamp)
            rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes),
                                      layout=read.layout, first_answers=read.preview()))
        elif is_web_page(file):
            if columns is not None or sheets:
                raise UserInputError(f"{shown_path(file)} is a web page, not a .csv or .xlsx "
                                     "table; --columns and --sheet apply only to one.")
            read = _page_round(file, limits, vendor_id=vendor_id, round_number=round_number,
                               timestamp=timestamp)
            rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes),
                                      layout=read.layout, first_answers=read.preview()))
        elif file in vsaq:
            read = layout_round(shown_path(file), read_vsaq(file, vsaq[file]),
                                vendor_id=vendor_id, round_number=round_number,
                                timestamp=timestamp, limits=limits)
            rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes),
                                      layout=read.layout, first_answers=read.preview()))
        else:
            payload = load_payload_file(file, limits=limits)
            first = [{"row": i, "criterion": r.criterion_question_text,
                      "question": r.question_text, "answer": r.answer_text}
                     for i, r in enumerate(payload.responses[:3], 1)]
            rounds.append(LoadedRound(payload, shown_path(file), layout="bulk payload",
                                      first_answers=first))
    return rounds

