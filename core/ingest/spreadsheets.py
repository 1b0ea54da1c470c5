"""Questionnaire rounds and criteria lists as spreadsheets (.csv, .xlsx).

A round read from a spreadsheet becomes the same bulk payload as a JSON round and passes the
same validation, so every rule of a JSON round holds. What a spreadsheet adds are its own
ways to go wrong (merged cells, formulas, dates, encodings, macros), each refused in one
sentence naming the file, sheet, row and column the user can go and fix."""

from __future__ import annotations

import csv
import io
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.formula import ArrayFormula, DataTableFormula
from pydantic import ValidationError

from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.hashing import content_hash
from core.ingest import read_user_file, refuse_too_large, shown_path
from core.ingest.layouts import (
    HEADER_SEARCH_ROWS,
    ColumnMapping,
    Grid,
    LayoutRead,
    Rows,
    read_layout,
    read_mapped,
    recognise,
)
from core.ingest.questionnaire import _first_error, parse_payload
from core.ingest.sample import MAX_CRITERIA_FILE_BYTES, load_criteria
from core.models import PayloadLimits, QuestionnairePayload

SPREADSHEET_SUFFIXES = (".csv", ".xlsx")
# A workbook is a zip of XML files; what it unpacks to is checked before openpyxl reads it,
# so a small file that unpacks to gigabytes (a zip bomb) is refused unread.
MAX_UNPACKED_BYTES = 100_000_000
# A standard questionnaire is one round however many questions it answers (the SIG Core has
# about 1,000); the round's answers are committed in one store write, which takes 5,461.
MAX_WORKBOOK_RESPONSES = 5_000
# A criteria list is a short list; a spreadsheet of more rows is refused before it is read.
MAX_CRITERIA_ROWS = 10_000

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP_MAGIC = b"PK\x03\x04"
_MACROS = "xl/vbaProject.bin"
_DELIMITERS = {",": "commas", ";": "semicolons", "\t": "tabs"}
_BOMS = ((b"\xef\xbb\xbf", "utf-8", "UTF-8"), (b"\xff\xfe", "utf-16-le", "UTF-16"),
         (b"\xfe\xff", "utf-16-be", "UTF-16"))
_COLUMNS_HINT = "--columns (for example --columns id=A,question=B,answer=C+E)"
_SAVE_AS_CSV = 'save it from Excel as "CSV UTF-8 (Comma delimited)" and try again'


def is_spreadsheet(path_or_name: Path | str) -> bool:
    """True for a name ending in .csv or .xlsx (any case): a round read by this module."""
    return Path(str(path_or_name)).suffix.lower() in SPREADSHEET_SUFFIXES


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


# Columns ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TableSpec:
    """The columns one kind of spreadsheet has: field -> the headers that name it."""

    what: str  # "a questionnaire round" / "a criteria list"
    fields: dict[str, tuple[str, ...]]
    required: tuple[str, ...]
    sheet_names: tuple[str, ...]  # a sheet of one of these names is read, whatever else
    max_rows: int
    too_many: Callable[[str, int, int, int, int], str]  # (where, count, first, last, max)


def _header_key(value: str) -> str:
    return " ".join(value.replace("_", " ").lower().split())


def _round_too_many(where: str, count: int, first: int, last: int, most: int) -> str:
    return (f"{where} holds {count:,} responses (rows {first:,} to {last:,}); a spreadsheet "
            f"round may hold at most {most:,} (the answers are committed in one write): split "
            "it into several files, which accumulate in the round.")


def _criteria_too_many(where: str, count: int, first: int, last: int, most: int) -> str:
    return (f"{where} holds {count:,} criteria (rows {first:,} to {last:,}); a criteria list "
            f"may hold at most {most:,}.")


_ROUND_SPEC = _TableSpec(
    what="a questionnaire round",
    fields={"criterion": ("criterion", "criterion question text"),
            "question": ("question", "question text"),
            "answer": ("answer", "answer text")},
    required=("criterion", "question", "answer"),
    sheet_names=("answers",),
    max_rows=MAX_WORKBOOK_RESPONSES,
    too_many=_round_too_many,
)


_CRITERIA_SPEC = _TableSpec(
    what="a criteria list",
    fields={"id": ("id",), "criterion": ("criterion", "criterion question text"),
            "question": ("question", "question text"),
            "questionnaire_ids": ("questionnaire ids", "questionnaire id")},
    required=("criterion",),
    sheet_names=("criteria",),
    max_rows=MAX_CRITERIA_ROWS,
    too_many=_criteria_too_many,
)


@dataclass(frozen=True)
class _Layout:
    """Where a table's columns are: the header row and the 0-based column of each field."""

    where: str  # "round_2.xlsx, sheet Answers" or "round_2.csv"
    header_row: int
    headers: list[str]
    columns: dict[str, int]

    def place(self, row: int, field: str) -> str:
        return f"{self.where}, row {row}, column {self.column_name(field)}"

    def column_name(self, field: str) -> str:
        return self.headers[self.columns[field]]


def _find_columns(headers: Sequence[str], spec: _TableSpec) -> dict[str, list[int]]:
    """field -> every column whose header names it."""
    found: dict[str, list[int]] = {}
    for index, header in enumerate(headers):
        key = _header_key(header)
        for field, names in spec.fields.items():
            if key in names:
                found.setdefault(field, []).append(index)
    return found


def _has_columns(headers: Sequence[str], spec: _TableSpec) -> bool:
    found = _find_columns(headers, spec)
    return all(field in found for field in spec.required)


def _layout(where: str, header_row: int, headers: list[str], spec: _TableSpec,
            notes: list[str]) -> _Layout:
    """The columns of a header row, or one sentence naming what is missing or doubled."""
    found = _find_columns(headers, spec)
    missing = [field for field in spec.required if field not in found]
    if missing:
        shown = ", ".join(h for h in headers if h) or "none"
        names = _and(missing)
        absent = f"is no {names} column" if len(missing) == 1 else f"are no {names} columns"
        hint = f"; or map the columns with {_COLUMNS_HINT}" if spec.sheet_names == (
            "answers",) else ""
        raise UserInputError(
            f"{where}, row {header_row}: there {absent} (headers found: {shown}); the first "
            f"non-blank row must hold the headers {_and(spec.required)}{hint}.")
    for field, indexes in found.items():
        if len(indexes) > 1:
            shown = " and ".join(f"{headers[i]} in column {get_column_letter(i + 1)}"
                                 for i in indexes[:2])
            raise UserInputError(
                f"{where}, row {header_row}: two columns are headed {field} ({shown}); keep "
                "one of them.")
    columns = {field: indexes[0] for field, indexes in found.items()}
    ignored = [h for i, h in enumerate(headers) if h and i not in columns.values()]
    if ignored:
        notes.append(f"Columns {', '.join(ignored)} are not part of {spec.what} and were "
                     "ignored." if len(ignored) > 1 else
                     f"Column {ignored[0]} is not part of {spec.what} and was ignored.")
    return _Layout(where=where, header_row=header_row, headers=headers, columns=columns)


def _and(words: Sequence[str]) -> str:
    """a; a and b; a, b and c."""
    return " and ".join(", ".join(words).rsplit(", ", 1))


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _mapped_blank(values: Sequence[object], layout: _Layout) -> bool:
    return all(_is_blank(values[i]) if i < len(values) else True
               for i in layout.columns.values())


# Tables: the rows of the chosen sheet, each cell turned into text ----------------------------


@dataclass
class _Row:
    number: int
    cells: dict[str, str | None]  # field -> stripped text, None where blank


def _collect_rows(layout: _Layout, records: Iterable[tuple[int, Sequence[object]]],
                  text_of: Callable[[int, str, object], str | None],
                  notes: list[str]) -> list[_Row]:
    """Every non-blank row below the header, its mapped cells as text. Rows blank in the
    mapped columns are skipped; one holding text only in ignored columns is noted."""
    rows: list[_Row] = []
    unmapped_only: list[int] = []
    unheaded: set[int] = set()
    for number, values in records:
        if _mapped_blank(values, layout):
            if any(not _is_blank(v) for v in values):
                unmapped_only.append(number)
            continue
        if all(index < len(values) and isinstance(values[index], str)
               and _header_key(values[index]) == _header_key(layout.headers[index])
               for index in layout.columns.values()):
            # Two files pasted into one: the second's header read as an answer otherwise.
            raise UserInputError(
                f"{layout.where}, row {number} repeats the header row (row "
                f"{layout.header_row}); remove it, or split the file where it starts.")
        for index, value in enumerate(values):
            headed = index < len(layout.headers) and layout.headers[index]
            if not headed and not _is_blank(value):
                unheaded.add(index)
        cells = {field: text_of(number, field, values[index] if index < len(values) else None)
                 for field, index in layout.columns.items()}
        rows.append(_Row(number=number, cells=cells))
    if unmapped_only:
        shown = ", ".join(str(n) for n in unmapped_only[:10])
        more = f" and {len(unmapped_only) - 10:,} more" if len(unmapped_only) > 10 else ""
        notes.append(f"Rows {shown}{more} hold text only in ignored columns and were skipped."
                     if len(unmapped_only) > 1 else
                     f"Row {shown} holds text only in ignored columns and was skipped.")
    if unheaded:
        letters = ", ".join(get_column_letter(i + 1) for i in sorted(unheaded))
        notes.append(f"Cells in column(s) {letters}, which have no header, were ignored.")
    return rows


def _refuse_row_count(layout: _Layout, spec: _TableSpec, numbers: Sequence[int]) -> None:
    """Refuse more rows than the spec allows, counted before any is read, and none at all."""
    if len(numbers) > spec.max_rows:
        raise UserInputError(spec.too_many(layout.where, len(numbers), numbers[0], numbers[-1],
                                           spec.max_rows))
    if not numbers:
        raise UserInputError(
            f"{layout.where} has a header row (row {layout.header_row}) but no rows below it; "
            f"{spec.what} needs at least one.")


# CSV ----------------------------------------------------------------------------------------


def _decode_csv(name: str, data: bytes) -> str:
    """UTF-8 (a BOM allowed) or UTF-16 with a BOM, or one sentence naming the first bad byte."""
    if data.startswith(_ZIP_MAGIC):
        raise UserInputError(
            f"{name} is an Excel workbook, not CSV text; name it .xlsx, or {_SAVE_AS_CSV}.")
    codec, label, skip = "utf-8", "UTF-8", 0
    for bom, bom_codec, bom_label in _BOMS:
        if data.startswith(bom):
            codec, label, skip = bom_codec, bom_label, len(bom)
            break
    try:
        text = data[skip:].decode(codec)
    except UnicodeDecodeError as exc:
        offset = exc.start + skip
        raise UserInputError(
            f"{name} is not {label} text (byte 0x{data[offset]:02X} at offset {offset:,} "
            f"cannot be decoded); {_SAVE_AS_CSV}.") from None
    first_line = text.split("\n", 1)[0]
    if "\x00" in first_line:  # a NUL in a cell is refused by the cell's own rules
        raise UserInputError(
            f"{name} holds a NUL character in its first line (character "
            f"{first_line.index(chr(0)):,}), as UTF-16 text without a byte-order mark does; "
            f"{_SAVE_AS_CSV}.")
    return text


def _csv_records(text: str, delimiter: str) -> Iterator[list[str]]:
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)


def _csv_header(text: str, delimiter: str) -> list[str] | None:
    """The first non-blank record read with this delimiter (empty when there is none); None
    where it cannot be read."""
    try:
        for record in _csv_records(text, delimiter):
            if any(cell.strip() for cell in record):
                return [cell.strip() for cell in record]
    except csv.Error:
        return None
    return []


def _choose_delimiter(name: str, text: str, spec: _TableSpec) -> str:
    """Comma, semicolon or tab: the one whose split of the header row has the columns; the
    one the header row holds most when several (or none) do."""
    headers = {d: _csv_header(text, d) for d in _DELIMITERS}
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    counts = {d: first_line.count(d) for d in _DELIMITERS}
    fitting = [d for d, h in headers.items() if h is not None and _has_columns(h, spec)]
    pool = fitting or [d for d, h in headers.items() if h is not None] or [","]
    most = max(counts[d] for d in pool)
    best = [d for d in pool if counts[d] == most]
    if fitting and len({tuple(headers[d] or ()) for d in best}) > 1:
        names = _and([_DELIMITERS[d] for d in best])
        raise UserInputError(
            f"{name}: the header row reads as the columns {', '.join(spec.required)} when split "
            f"at {names} alike, so the separator is ambiguous; {_SAVE_AS_CSV}.")
    return best[0]


def _csv_error(where: str, row: int, exc: csv.Error) -> UserInputError:
    reason = str(exc)
    if "unexpected end of data" in reason:
        reason = "a quoted cell is never closed"
    elif "field larger than field limit" in reason:
        reason = f"a cell is longer than {csv.field_size_limit():,} characters"
    elif "expected after" in reason:
        reason = "a closing quote is followed by more text in the same cell"
    return UserInputError(f"{where}, row {row}: the row cannot be read as CSV ({reason}).")


def _read_csv(name: str, data: bytes, spec: _TableSpec,
              notes: list[str]) -> tuple[_Layout, list[_Row]]:
    text = _decode_csv(name, data)
    if not text.strip():
        raise UserInputError(f"{name} is empty; {spec.what} needs a header row.")
    delimiter = _choose_delimiter(name, text, spec)
    if delimiter != ",":
        notes.append(f"The columns are separated by {_DELIMITERS[delimiter]}.")
    records: list[tuple[int, list[str]]] = []
    number = 0
    try:
        for number, record in enumerate(_csv_records(text, delimiter), start=1):
            records.append((number, record))
    except csv.Error as exc:
        raise _csv_error(name, number + 1, exc) from None
    header_at = next((i for i, (_, r) in enumerate(records) if any(c.strip() for c in r)), None)
    if header_at is None:
        raise UserInputError(f"{name} holds no text in any cell; {spec.what} needs a header row.")
    header_row, header = records[header_at]
    layout = _layout(name, header_row, [c.strip() for c in header], spec, notes)
    body = records[header_at + 1:]
    _refuse_row_count(layout, spec, [n for n, r in body if not _mapped_blank(r, layout)])

    def text_of(row: int, field: str, value: object) -> str | None:
        return None if _is_blank(value) else str(value).strip()

    return layout, _collect_rows(layout, body, text_of, notes)


# XLSX ---------------------------------------------------------------------------------------


def _open_workbook_zip(name: str, data: bytes) -> None:
    """Refuse, before openpyxl reads a byte, what it must not read: an encrypted or old-format
    file, a damaged one, a workbook with macros, and one that unpacks to too much."""
    if data.startswith(_OLE_MAGIC):
        if "EncryptionInfo".encode("utf-16-le") in data:
            raise UserInputError(
                f"{name} is password-protected (an encrypted workbook); remove the password "
                "in Excel (File > Info > Protect Workbook) and save it again as .xlsx.")
        raise UserInputError(
            f"{name} is an old-format Excel file (.xls), not an .xlsx workbook; open it in "
            "Excel and save it as .xlsx.")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        raise UserInputError(
            f"{name} is not a readable .xlsx workbook (it is damaged or not an Excel file); "
            "open it in Excel and save it again as .xlsx.") from None
    names = {member.filename for member in members}
    if _MACROS in names:
        raise UserInputError(
            f"{name} contains macros ({_MACROS}); save it in Excel as a macro-free \"Excel "
            "Workbook (.xlsx)\" and try again.")
    unpacked = sum(member.file_size for member in members)
    if unpacked > MAX_UNPACKED_BYTES:
        raise UserInputError(
            f"{name} unpacks to {unpacked:,} bytes; a workbook may unpack to at most "
            f"{MAX_UNPACKED_BYTES:,} (copy the answers into a new workbook and save that).")


def _load_workbook(name: str, data: bytes, *, read_only: bool, data_only: bool = False) -> Any:
    with warnings.catch_warnings():  # openpyxl warns about features it drops (validation...)
        warnings.simplefilter("ignore")
        try:
            return openpyxl.load_workbook(io.BytesIO(data), read_only=read_only,
                                          data_only=data_only)
        except Exception:  # a damaged workbook fails in any of many ways deep inside openpyxl
            raise UserInputError(
                f"{name} is not a readable .xlsx workbook (it is damaged or not an Excel "
                "file); open it in Excel and save it again as .xlsx.") from None


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
        if any(not _is_blank(v) for v in values):
            return number, [_value_text(v)[0] if v is not None else "" for v in values]
    return None


def _choose_sheet(name: str, workbook: Any, spec: _TableSpec) -> Any:
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
        if header is not None and _has_columns(header[1], spec):
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
        hint = f", or map the columns with {_COLUMNS_HINT}" if spec.sheet_names == (
            "answers",) else ""
        raise UserInputError(
            f"{name} has no sheet with the columns {wanted} (sheets: {'; '.join(found)}); put "
            f"them in a sheet named {preferred}{hint}.")
    return fitting[0]


def _count_sheet(name: str, data: bytes, spec: _TableSpec,
                 notes: list[str]) -> tuple[str, _Layout]:
    """Streamed first pass: choose the sheet, read its header, and refuse too many rows
    before the workbook is loaded whole."""
    workbook = _load_workbook(name, data, read_only=True)
    try:
        sheet = _choose_sheet(name, workbook, spec)
        where = f"{name}, sheet {sheet.title}"
        header = _sheet_header(sheet)
        if header is None:
            raise UserInputError(f"{where} is empty; {spec.what} needs a header row.")
        header_row, headers = header
        try:
            layout = _layout(where, header_row, headers, spec, notes)
        except UserInputError:
            # Merging header cells empties all but the first, so a column looks missing: say
            # what the user did rather than what it looks like.
            _refuse_merged_header(where, _load_workbook(name, data, read_only=False)[
                sheet.title], header_row)
            raise
        numbers = [number for number, values in
                   enumerate(sheet.iter_rows(values_only=True), start=1)
                   if number > header_row and not _mapped_blank(values, layout)]
        _refuse_row_count(layout, spec, numbers)
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


def _read_xlsx(name: str, data: bytes, spec: _TableSpec,
               notes: list[str]) -> tuple[str, _Layout, list[_Row]]:
    _open_workbook_zip(name, data)
    title, layout = _count_sheet(name, data, spec, notes)
    workbook = _load_workbook(name, data, read_only=False)
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
        if _is_blank(value):
            return None
        text, kind = _value_text(value)
        if kind is not None:
            notes.append(f"{place}: the {kind} was read as the text {text}.")
        return text

    return title, layout, _collect_rows(layout, records, text_of, notes)


def _read_table(name: str, data: bytes, spec: _TableSpec,
                notes: list[str]) -> tuple[str | None, _Layout, list[_Row]]:
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        layout, rows = _read_csv(name, data, spec, notes)
        return None, layout, rows
    if suffix == ".xlsx":
        return _read_xlsx(name, data, spec, notes)
    raise UserInputError(f"{name} is not a .csv or .xlsx file.")


# Rounds -------------------------------------------------------------------------------------

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
            text = _decode_csv(name, data)
            for delimiter in _DELIMITERS:
                try:
                    rows = list(_csv_records(text, delimiter))
                except csv.Error:
                    continue
                found = read_layout([Rows("", rows)])
                if found is not None:
                    return found
            return None
        _open_workbook_zip(name, data)
        streamed = _load_workbook(name, data, read_only=True, data_only=True)
        try:
            heads = [Rows(sheet.title, list(islice(sheet.iter_rows(values_only=True),
                                                   HEADER_SEARCH_ROWS)))
                     for sheet in streamed.worksheets if sheet.sheet_state == "visible"]
        finally:
            streamed.close()
        recognised = recognise(heads)
        if recognised is None:
            return None
        formulas = _load_workbook(name, data, read_only=False)
        values = _load_workbook(name, data, read_only=False, data_only=True)
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
            text = _decode_csv(name, data)
            delimiter = max(_DELIMITERS, key=lambda d: text.split("\n", 1)[0].count(d))
            try:
                rows = list(_csv_records(text, delimiter))
            except csv.Error as exc:
                raise _csv_error(name, 1, exc) from None
            return read_mapped(Rows("", rows), mapping, label)
        _open_workbook_zip(name, data)
        formulas = _load_workbook(name, data, read_only=False)
        values = _load_workbook(name, data, read_only=False, data_only=True)
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
    message = _first_error(exc)
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
    sheet, layout, rows = _read_table(name, data, spec, notes)
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


def _translate(exc: ValidationError, layout: _Layout, rows: list[_Row],
               payload: dict[str, Any]) -> str:
    """The payload's first error as a sentence about the option or the cell it came from."""
    error = exc.errors()[0]
    loc = error["loc"]
    message = _first_error(exc)
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


# Criteria lists -----------------------------------------------------------------------------


def load_criteria_file(path: Path | str, *, max_chars: int) -> list[CriterionEntry]:
    """A criteria list: a .csv or .xlsx file with a criterion column (and optional id and
    question columns), or any other file with one criterion per line."""
    path = Path(path)
    if not is_spreadsheet(path):
        return [CriterionEntry(text) for text in load_criteria(path, max_chars=max_chars)]
    name = shown_path(path)
    raw = read_user_file(path, max_bytes=MAX_CRITERIA_FILE_BYTES, what="a criteria file")
    return criteria_from_spreadsheet(name, raw, max_chars=max_chars)


def criteria_from_spreadsheet(name: str, data: bytes, *, max_chars: int) -> list[CriterionEntry]:
    """The criteria of a .csv or .xlsx file's bytes (an upload, or a file read from disk)."""
    refuse_too_large(name, len(data), MAX_CRITERIA_FILE_BYTES, "a criteria file")
    _, layout, rows = _read_table(name, data, _CRITERIA_SPEC, [])
    entries: list[CriterionEntry] = []
    ids: dict[str, int] = {}
    for row in rows:
        for field, text in row.cells.items():
            if text is not None:
                _check_cell_text(layout.place(row.number, field), field, text, max_chars)
        criterion = row.cells["criterion"]
        if criterion is None:
            raise UserInputError(f"{layout.place(row.number, 'criterion')}: the criterion is "
                                 "blank.")
        entry_id = row.cells.get("id")
        if entry_id is not None:
            if entry_id in ids:
                raise UserInputError(
                    f"{layout.place(row.number, 'id')}: the id {entry_id} is already used in "
                    f"row {ids[entry_id]}; each id must be unique.")
            ids[entry_id] = row.number
        question = row.cells.get("question")
        mapped = tuple(dict.fromkeys(
            part.strip() for part in (row.cells.get("questionnaire_ids") or "").split(";")
            if part.strip()))
        entries.append(CriterionEntry(criterion, id=entry_id,
                                      question=None if question == criterion else question,
                                      questionnaire_ids=mapped))
    if not entries:
        raise UserInputError(f"{name} holds no criteria.")
    return entries


def _check_cell_text(place: str, field: str, text: str, max_chars: int) -> None:
    if "\x00" in text:
        raise UserInputError(f"{place}: the {field} contains a NUL character.")
    if field != "id" and len(text) > max_chars:
        raise UserInputError(
            f"{place}: the {field} is {len(text):,} characters long; at most {max_chars:,} are "
            "allowed.")
