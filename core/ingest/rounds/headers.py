"""A table whose header row names its columns (a questionnaire round of criterion, question and
answer columns, or a criteria list): the columns one kind of table has, where they are in the
header row, and the rows below it as text, each refusal naming the row and column."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from openpyxl.utils import get_column_letter

from core.errors import UserInputError
from core.ingest.rounds.tables import header_key

COLUMNS_HINT = "--columns (for example --columns id=A,question=B,answer=C+E)"


@dataclass(frozen=True)
class TableSpec:
    """The columns one kind of spreadsheet has: field -> the headers that name it."""

    what: str  # "a questionnaire round" / "a criteria list"
    fields: dict[str, tuple[str, ...]]
    required: tuple[str, ...]
    sheet_names: tuple[str, ...]  # a sheet of one of these names is read, whatever else
    max_rows: int
    too_many: Callable[[str, int, int, int, int], str]  # (where, count, first, last, max)


@dataclass(frozen=True)
class TableColumns:
    """Where a table's columns are: the header row and the 0-based column of each field."""

    where: str  # "round_2.xlsx, sheet Answers" or "round_2.csv"
    header_row: int
    headers: list[str]
    columns: dict[str, int]

    def place(self, row: int, field: str) -> str:
        return f"{self.where}, row {row}, column {self.column_name(field)}"

    def column_name(self, field: str) -> str:
        return self.headers[self.columns[field]]


def _find_columns(headers: Sequence[str], spec: TableSpec) -> dict[str, list[int]]:
    """field -> every column whose header names it."""
    found: dict[str, list[int]] = {}
    for index, header in enumerate(headers):
        key = header_key(header)
        for field, names in spec.fields.items():
            if key in names:
                found.setdefault(field, []).append(index)
    return found


def has_columns(headers: Sequence[str], spec: TableSpec) -> bool:
    """True when the headers name every column the spec requires."""
    found = _find_columns(headers, spec)
    return all(field in found for field in spec.required)


def header_columns(where: str, header_row: int, headers: list[str], spec: TableSpec,
                   notes: list[str]) -> TableColumns:
    """The columns of a header row, or one sentence naming what is missing or doubled."""
    found = _find_columns(headers, spec)
    missing = [field for field in spec.required if field not in found]
    if missing:
        shown = ", ".join(h for h in headers if h) or "none"
        names = word_list(missing)
        absent = f"is no {names} column" if len(missing) == 1 else f"are no {names} columns"
        hint = f"; or map the columns with {COLUMNS_HINT}" if spec.sheet_names == (
            "answers",) else ""
        raise UserInputError(
            f"{where}, row {header_row}: there {absent} (headers found: {shown}); the first "
            f"non-blank row must hold the headers {word_list(spec.required)}{hint}.")
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
    return TableColumns(where=where, header_row=header_row, headers=headers, columns=columns)


def word_list(words: Sequence[str]) -> str:
    """a; a and b; a, b and c."""
    return " and ".join(", ".join(words).rsplit(", ", 1))


def is_blank(value: object) -> bool:
    """True for an empty cell or one holding only spaces."""
    return value is None or (isinstance(value, str) and not value.strip())


def mapped_blank(values: Sequence[object], layout: TableColumns) -> bool:
    """True for a row blank in every column the table reads."""
    return all(is_blank(values[i]) if i < len(values) else True
               for i in layout.columns.values())


# Tables: the rows of the chosen sheet, each cell turned into text ----------------------------


@dataclass
class TableRow:
    """One row below the header: its number and the text of each field's cell."""

    number: int
    cells: dict[str, str | None]  # field -> stripped text, None where blank


def collect_rows(layout: TableColumns, records: Iterable[tuple[int, Sequence[object]]],
                 text_of: Callable[[int, str, object], str | None],
                 notes: list[str]) -> list[TableRow]:
    """Every non-blank row below the header, its mapped cells as text. Rows blank in the
    mapped columns are skipped; one holding text only in ignored columns is noted."""
    rows: list[TableRow] = []
    unmapped_only: list[int] = []
    unheaded: set[int] = set()
    for number, values in records:
        if mapped_blank(values, layout):
            if any(not is_blank(v) for v in values):
                unmapped_only.append(number)
            continue
        if all(index < len(values) and isinstance(values[index], str)
               and header_key(values[index]) == header_key(layout.headers[index])
               for index in layout.columns.values()):
            # Two files pasted into one: the second's header read as an answer otherwise.
            raise UserInputError(
                f"{layout.where}, row {number} repeats the header row (row "
                f"{layout.header_row}); remove it, or split the file where it starts.")
        for index, value in enumerate(values):
            headed = index < len(layout.headers) and layout.headers[index]
            if not headed and not is_blank(value):
                unheaded.add(index)
        cells = {field: text_of(number, field, values[index] if index < len(values) else None)
                 for field, index in layout.columns.items()}
        rows.append(TableRow(number=number, cells=cells))
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


def refuse_row_count(layout: TableColumns, spec: TableSpec, numbers: Sequence[int]) -> None:
    """Refuse more rows than the spec allows, counted before any is read, and none at all."""
    if len(numbers) > spec.max_rows:
        raise UserInputError(spec.too_many(layout.where, len(numbers), numbers[0], numbers[-1],
                                           spec.max_rows))
    if not numbers:
        raise UserInputError(
            f"{layout.where} has a header row (row {layout.header_row}) but no rows below it; "
            f"{spec.what} needs at least one.")
