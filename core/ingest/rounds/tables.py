"""Spreadsheet files opened for reading: a CSV file decoded and split into records, a workbook
checked before openpyxl reads it (old format, encryption, macros, a zip bomb) and loaded, and
a sheet's cells as a reader sees them (`Rows`, `Grid`)."""

from __future__ import annotations

import csv
import io
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.utils import get_column_letter

from core.errors import UserInputError

# How far down a sheet a header row is looked for: a title block, instructions, a vendor's
# contact rows come first in the HECVAT (its first header row is row 24).
HEADER_SEARCH_ROWS = 40

SPREADSHEET_SUFFIXES = (".csv", ".xlsx")
# A workbook is a zip of XML files; what it unpacks to is checked before openpyxl reads it,
# so a small file that unpacks to gigabytes (a zip bomb) is refused unread.
MAX_UNPACKED_BYTES = 100_000_000

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP_MAGIC = b"PK\x03\x04"
_MACROS = "xl/vbaProject.bin"
DELIMITERS = {",": "commas", ";": "semicolons", "\t": "tabs"}
_BOMS = ((b"\xef\xbb\xbf", "utf-8", "UTF-8"), (b"\xff\xfe", "utf-16-le", "UTF-16"),
         (b"\xfe\xff", "utf-16-be", "UTF-16"))
SAVE_AS_CSV = 'save it from Excel as "CSV UTF-8 (Comma delimited)" and try again'


def is_spreadsheet(path_or_name: Path | str) -> bool:
    """True for a name ending in .csv or .xlsx (any case): a file read as a table."""
    return Path(str(path_or_name)).suffix.lower() in SPREADSHEET_SUFFIXES


# CSV ----------------------------------------------------------------------------------------


def decode_csv(name: str, data: bytes) -> str:
    """UTF-8 (a BOM allowed) or UTF-16 with a BOM, or one sentence naming the first bad byte."""
    if data.startswith(_ZIP_MAGIC):
        raise UserInputError(
            f"{name} is an Excel workbook, not CSV text; name it .xlsx, or {SAVE_AS_CSV}.")
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
            f"cannot be decoded); {SAVE_AS_CSV}.") from None
    first_line = text.split("\n", 1)[0]
    if "\x00" in first_line:  # a NUL in a cell is refused by the cell's own rules
        raise UserInputError(
            f"{name} holds a NUL character in its first line (character "
            f"{first_line.index(chr(0)):,}), as UTF-16 text without a byte-order mark does; "
            f"{SAVE_AS_CSV}.")
    return text


def csv_records(text: str, delimiter: str) -> Iterator[list[str]]:
    """The records of CSV text split at `delimiter`; a malformed row raises csv.Error."""
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)


def csv_error(where: str, row: int, exc: csv.Error) -> UserInputError:
    """A row CSV cannot read, as one sentence naming the row and what is wrong with it."""
    reason = str(exc)
    if "unexpected end of data" in reason:
        reason = "a quoted cell is never closed"
    elif "field larger than field limit" in reason:
        reason = f"a cell is longer than {csv.field_size_limit():,} characters"
    elif "expected after" in reason:
        reason = "a closing quote is followed by more text in the same cell"
    return UserInputError(f"{where}, row {row}: the row cannot be read as CSV ({reason}).")


# XLSX ---------------------------------------------------------------------------------------


def check_workbook_zip(name: str, data: bytes) -> None:
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


def read_workbook(name: str, data: bytes, *, read_only: bool, data_only: bool = False) -> Any:
    """An openpyxl workbook of checked bytes, or one sentence when it cannot be read."""
    with warnings.catch_warnings():  # openpyxl warns about features it drops (validation...)
        warnings.simplefilter("ignore")
        try:
            return openpyxl.load_workbook(io.BytesIO(data), read_only=read_only,
                                          data_only=data_only)
        except Exception:  # a damaged workbook fails in any of many ways deep inside openpyxl
            raise UserInputError(
                f"{name} is not a readable .xlsx workbook (it is damaged or not an Excel "
                "file); open it in Excel and save it again as .xlsx.") from None


# Cells --------------------------------------------------------------------------------------


def header_key(value: object) -> str:
    """A header as compared: lower case, spacing and underscores folded, a trailing
    asterisk dropped."""
    text = "" if value is None else str(value)
    return " ".join(text.replace("_", " ").lower().split()).rstrip("*").strip()


def cell_text(value: object) -> str:
    """A cell's value as the text a person sees."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text[:-9] if text.endswith("T00:00:00") else text
    return str(value).strip()


class Rows:
    """A table's cells by row and column (1-based): a CSV file, or the first rows of a sheet
    streamed to recognise its layout."""

    def __init__(self, title: str, rows: Sequence[Sequence[object]]) -> None:
        self.title = title
        self._rows = rows
        self.max_row = len(rows)
        self.max_column = max((len(r) for r in rows), default=0)

    def value(self, row: int, column: int) -> object:
        cells = self._rows[row - 1] if 0 < row <= len(self._rows) else ()
        return cells[column - 1] if 0 < column <= len(cells) else None

    def text(self, row: int, column: int) -> str:
        return cell_text(self.value(row, column))

    def text_or_blank(self, row: int, column: int) -> str:
        """The cell's text, or "" for a cell that cannot be read (a formula without a stored
        value): for a reader that only looks, such as a layout's guess."""
        try:
            return self.text(row, column)
        except UserInputError:
            return ""

    def row_keys(self, row: int, width: int) -> list[str]:
        return [header_key(self.value(row, column)) for column in range(1, width + 1)]


class Grid(Rows):
    """A worksheet's cells as read: stored values of formulas, merged cells as their value
    down the first column, and where a formula has no stored value."""

    def __init__(self, formulas: Any, values: Any) -> None:
        self.title: str = values.title
        self._values = values
        self._formulas = formulas
        self._merged: dict[tuple[int, int], tuple[int, int]] = {}
        for cells in values.merged_cells.ranges:
            for row in range(cells.min_row, cells.max_row + 1):
                for column in range(cells.min_col, cells.max_col + 1):
                    if (row, column) != (cells.min_row, cells.min_col):
                        self._merged[(row, column)] = (cells.min_row, cells.min_col)
        self.max_row: int = values.max_row
        self.max_column: int = values.max_column

    def value(self, row: int, column: int) -> object:
        """The value a reader sees at (row, column), 1-based."""
        anchor = self._merged.get((row, column))
        if anchor is not None:
            if anchor[1] != column:
                return None  # merged across: the value belongs to the first column
            row, column = anchor
        value = self._values.cell(row=row, column=column).value
        if value is None and self._formulas is not None:
            formula = self._formulas.cell(row=row, column=column)
            if formula.data_type == "f":
                raise UserInputError(
                    f"sheet {self.title}, cell {get_column_letter(column)}{row}: the formula "
                    f"{_formula_text(formula.value)} has no stored value (the workbook was "
                    "saved by a program that does not calculate); open it in Excel or "
                    "LibreOffice and save it again.")
        return value

    def row_keys(self, row: int, width: int) -> list[str]:
        keys = []
        for column in range(1, width + 1):
            try:
                keys.append(header_key(self.value(row, column)))
            except UserInputError:
                keys.append("")
        return keys


def _formula_text(value: object) -> str:
    text = getattr(value, "text", value)
    text = str(text)
    return text if len(text) <= 60 else f"{text[:57]}..."
