"""A headed table read from a spreadsheet's bytes: a CSV file split at the delimiter its header
row reads with, or the sheet of a workbook that holds the columns, each cell turned into text
(a date or true/false value noted, a formula, error value or merged cell refused)."""

from __future__ import annotations

import csv
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from openpyxl.worksheet.formula import ArrayFormula, DataTableFormula

from core.errors import UserInputError
from core.ingest.rounds.headers import (
    COLUMNS_HINT,
    TableColumns,
    TableRow,
    TableSpec,
    collect_rows,
    has_columns,
    header_columns,
    is_blank,
    mapped_blank,
    refuse_row_count,
    word_list,
)
from core.ingest.rounds.tables import (
    DELIMITERS,
    SAVE_AS_CSV,
    check_workbook_zip,
    csv_error,
    csv_records,
    decode_csv,
    read_workbook,
)

# CSV ----------------------------------------------------------------------------------------


def _csv_header(text: str, delimiter: str) -> list[str] | None:
    """The first non-blank record read with this delimiter (empty when there is none); None
    where it cannot be read."""
    try:
        for record in csv_records(text, delimiter):
            if any(cell.strip() for cell in record):
                return [cell.strip() for cell in record]
    except csv.Error:
        return None
    return []


def _choose_delimiter(name: str, text: str, spec: TableSpec) -> str:
    """Comma, semicolon or tab: the one whose split of the header row has the columns; the
    one the header row holds most when several (or none) do."""
    headers = {d: _csv_header(text, d) for d in DELIMITERS}
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    counts = {d: first_line.count(d) for d in DELIMITERS}
    fitting = [d for d, h in headers.items() if h is not None and has_columns(h, spec)]
    pool = fitting or [d for d, h in headers.items() if h is not None] or [","]
    most = max(counts[d] for d in pool)
    best = [d for d in pool if counts[d] == most]
    if fitting and len({tuple(headers[d] or ()) for d in best}) > 1:
        names = word_list([DELIMITERS[d] for d in best])
        raise UserInputError(
            f"{name}: the header row reads as the columns {', '.join(spec.required)} when split "
            f"at {names} alike, so the separator is ambiguous; {SAVE_AS_CSV}.")
    return best[0]


def _read_csv(name: str, data: bytes, spec: TableSpec,
              notes: list[str]) -> tuple[TableColumns, list[TableRow]]:
    text = decode_csv(name, data)
    if not text.strip():
        raise UserInputError(f"{name} is empty; {spec.what} needs a header row.")
    delimiter = _choose_delimiter(name, text, spec)
    if delimiter != ",":
        notes.append(f"The columns are separated by {DELIMITERS[delimiter]}.")
    records: list[tuple[int, list[str]]] = []
    number = 0
    try:
        for number, record in enumerate(csv_records(text, delimiter), start=1):
            records.append((number, record))
    except csv.Error as exc:
        raise csv_error(name, number + 1, exc) from None
    header_at = next((i for i, (_, r) in enumerate(records) if any(c.strip() for c in r)), None)
    if header_at is None:
        raise UserInputError(f"{name} holds no text in any cell; {spec.what} needs a header row.")
    header_row, header = records[header_at]
    layout = header_columns(name, header_row, [c.strip() for c in header], spec, notes)
    body = records[header_at + 1:]
    refuse_row_count(layout, spec, [n for n, r in body if not mapped_blank(r, layout)])

    def text_of(row: int, field: str, value: object) -> str | None:
        return None if is_blank(value) else str(value).strip()

    return layout, collect_rows(layout, body, text_of, notes)


# XLSX ---------------------------------------------------------------------------------------


def _value_text(value: object) -> tuple[str, str | None]:
    """A cell value as the text a person sees, and what kind it was converted from (None for
    text and numbers, which read as themselves)."""
    if isinstance(value, bool):
        return ("TRUE" if value else "FALSE"), "true/false value"
    if isinstance(value, datetime):
        if value.time() == time(0):
            return value.date().isoformat(), "date"
        spec = "seconds" if value.microsecond == 0 else "auto"
        return value.isoformat(timespec=spec), "date and time"
    if isinstance(value, date):
        return value.isoformat(), "date"
    if isinstance(value, time):
        return value.isoformat(timespec="seconds" if value.microsecond == 0 else "auto"), "time"
    if isinstance(value, timedelta):
        return str(value), "duration"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)), None
    return str(value).strip(), None


def _sheet_header(sheet: Any) -> tuple[int, list[str]] | None:
    """The first non-blank row of a worksheet, streamed: (row number, header texts)."""
    sheet.reset_dimensions()  # read every row, whatever size the file declares
    for number, values in enumerate(sheet.iter_rows(values_only=True), start=1):
        if any(not is_blank(v) for v in values):
            return number, [_value_text(v)[0] if v is not None else "" for v in values]
    return None


def _choose_sheet(name: str, workbook: Any, spec: TableSpec) -> Any:
    sheets = list(workbook.worksheets)
    if not sheets:
        raise UserInputError(f"{name} has no worksheet.")
    for sheet in sheets:
        if sheet.title.strip().lower() in spec.sheet_names:
            return sheet
    if len(sheets) == 1:
        return sheets[0]
    fitting = []
    for sheet in sheets:
        header = _sheet_header(sheet)
        if header is not None and has_columns(header[1], spec):
            fitting.append(sheet)
    wanted = ", ".join(spec.required)
    preferred = spec.sheet_names[0].capitalize()
    if len(fitting) > 1:
        raise UserInputError(
            f"{name} has several sheets with the columns {wanted} "
            f"({', '.join(s.title for s in fitting)}); name the one to read {preferred}.")
    if not fitting:
        found = []
        for sheet in sheets:
            header = _sheet_header(sheet)
            texts = [h for h in (header[1] if header else []) if h][:6]
            found.append(f"{sheet.title} with headers {', '.join(texts)}" if texts
                         else f"{sheet.title}, empty")
        hint = f", or map the columns with {COLUMNS_HINT}" if spec.sheet_names == (
            "answers",) else ""
        raise UserInputError(
            f"{name} has no sheet with the columns {wanted} (sheets: {'; '.join(found)}); put "
            f"them in a sheet named {preferred}{hint}.")
    return fitting[0]


def _count_sheet(name: str, data: bytes, spec: TableSpec,
                 notes: list[str]) -> tuple[str, TableColumns]:
    """Streamed first pass: choose the sheet, read its header, and refuse too many rows
    before the workbook is loaded whole."""
    workbook = read_workbook(name, data, read_only=True)
    try:
        sheet = _choose_sheet(name, workbook, spec)
        where = f"{name}, sheet {sheet.title}"
        header = _sheet_header(sheet)
        if header is None:
            raise UserInputError(f"{where} is empty; {spec.what} needs a header row.")
        header_row, headers = header
        try:
            layout = header_columns(where, header_row, headers, spec, notes)
        except UserInputError:
            # Merging header cells empties all but the first, so a column looks missing: say
            # what the user did rather than what it looks like.
            _refuse_merged_header(where, read_workbook(name, data, read_only=False)[
                sheet.title], header_row)
            raise
        numbers = [number for number, values in
                   enumerate(sheet.iter_rows(values_only=True), start=1)
                   if number > header_row and not mapped_blank(values, layout)]
        refuse_row_count(layout, spec, numbers)
        others = [s.title for s in workbook.worksheets if s.title != sheet.title]
        if others:
            notes.append(f"Read sheet {sheet.title}; sheet(s) {', '.join(others)} were not "
                         "read.")
        return sheet.title, layout
    finally:
        workbook.close()


def _refuse_merged_header(where: str, sheet: Any, header_row: int) -> None:
    for cells in sheet.merged_cells.ranges:
        if cells.min_row <= header_row <= cells.max_row:
            raise UserInputError(
                f"{where}, row {header_row}: the header row has merged cells ({cells.coord}); "
                "unmerge them so each column has its own header.")


def _read_xlsx(name: str, data: bytes, spec: TableSpec,
               notes: list[str]) -> tuple[str, TableColumns, list[TableRow]]:
    check_workbook_zip(name, data)
    title, layout = _count_sheet(name, data, spec, notes)
    workbook = read_workbook(name, data, read_only=False)
    sheet = workbook[title]
    merged = list(sheet.merged_cells.ranges)
    _refuse_merged_header(layout.where, sheet, layout.header_row)
    cells_by_row: dict[int, tuple[Any, ...]] = {}
    records: list[tuple[int, list[object]]] = []
    width = max(len(layout.headers), sheet.max_column)
    for row in sheet.iter_rows(min_row=layout.header_row + 1, max_row=sheet.max_row,
                               max_col=width):
        number = row[0].row
        cells_by_row[number] = row
        records.append((number, [cell.value for cell in row]))

    def text_of(number: int, field: str, value: object) -> str | None:
        place = layout.place(number, field)
        cell = cells_by_row[number][layout.columns[field]]
        for cells in merged:
            if (cells.min_row <= number <= cells.max_row
                    and cells.min_col <= cell.column <= cells.max_col):
                raise UserInputError(
                    f"{place}: the cell is merged with others ({cells.coord}); unmerge it and "
                    "give each row its own text.")
        if cell.data_type == "f" or isinstance(value, ArrayFormula | DataTableFormula):
            formula = value.text if isinstance(value, ArrayFormula) else value
            shown = f" ({formula})" if isinstance(formula, str) else ""
            raise UserInputError(
                f"{place}: the cell holds a formula{shown}; paste its value instead "
                "(Paste Special > Values).")
        if cell.data_type == "e":
            raise UserInputError(
                f"{place}: the cell holds the error value {value}; type the text instead.")
        if is_blank(value):
            return None
        text, kind = _value_text(value)
        if kind is not None:
            notes.append(f"{place}: the {kind} was read as the text {text}.")
        return text

    return title, layout, collect_rows(layout, records, text_of, notes)


def read_table(name: str, data: bytes, spec: TableSpec,
               notes: list[str]) -> tuple[str | None, TableColumns, list[TableRow]]:
    """The columns and rows of a .csv file or of the chosen sheet of an .xlsx file's bytes,
    and the sheet's name (None for a CSV file)."""
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        layout, rows = _read_csv(name, data, spec, notes)
        return None, layout, rows
    if suffix == ".xlsx":
        return _read_xlsx(name, data, spec, notes)
    raise UserInputError(f"{name} is not a .csv or .xlsx file.")
