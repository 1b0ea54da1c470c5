"""A table of any other layout read by a column mapping (`--columns id=A,question=B,answer=C+E`):
each field read from the columns named by letter or by header text, below the header row."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import UserInputError
from core.ingest.rounds.answers import (
    Layout,
    LayoutAnswer,
    LayoutRead,
    joined_answer,
    note_prefix,
    one_per_id,
    one_per_id_per_sheet,
)
from core.ingest.rounds.tables import HEADER_SEARCH_ROWS, Rows, header_key

MAPPED_FIELDS = ("id", "criterion", "question", "answer")
_LETTERS = re.compile(r"^[A-Z]{1,3}$")


@dataclass(frozen=True)
class ColumnMapping:
    """`--columns id=A,question=B,answer=C+E`: field -> the columns it is read from, each a
    column letter or a header text; `+` joins columns (an answer and its explanation)."""

    fields: dict[str, tuple[str, ...]]

    @classmethod
    def parse(cls, text: str) -> ColumnMapping:
        """The mapping `--columns` gives, or one sentence naming what is wrong with it."""
        fields: dict[str, tuple[str, ...]] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, equals, columns = part.partition("=")
            name = name.strip().lower()
            if not equals or not columns.strip():
                raise UserInputError(
                    f"--columns: '{part}' is not FIELD=COLUMN; write for example "
                    "--columns id=A,question=B,answer=C+E.")
            if name not in MAPPED_FIELDS:
                raise UserInputError(
                    f"--columns: '{name}' is not a field; the fields are "
                    f"{', '.join(MAPPED_FIELDS)}.")
            if name in fields:
                raise UserInputError(f"--columns names the field {name} twice; give it once.")
            fields[name] = tuple(c.strip() for c in columns.split("+") if c.strip())
        missing = [name for name in ("question", "answer") if name not in fields]
        if missing:
            raise UserInputError(
                f"--columns has no {' and no '.join(missing)} column; give at least "
                "question=... and answer=....")
        return cls(fields)

    def by_header(self) -> bool:
        """True when a column is named by its header text, not by letter."""
        return any(not _LETTERS.match(c) for cs in self.fields.values() for c in cs)

    def shown(self) -> str:
        """The mapping as `--columns` takes it."""
        return ",".join(f"{name}={'+'.join(columns)}" for name, columns in self.fields.items())


def _column_number(grid: Rows, header_row: int | None, column: str) -> int | None:
    """A column letter's number, or the column whose header (in `header_row`) is `column`."""
    if _LETTERS.match(column):
        number = 0
        for letter in column:
            number = number * 26 + ord(letter) - ord("A") + 1
        return number
    if header_row is None:
        return None
    keys = grid.row_keys(header_row, grid.max_column)
    key = header_key(column)
    return keys.index(key) + 1 if key in keys else None


def _mapped_header_row(grid: Rows, mapping: ColumnMapping) -> int | None:
    """The header row: the first row (of the first rows) holding every header text the
    mapping names; with letters alone, the first row with a text in every mapped column."""
    names = [header_key(c) for columns in mapping.fields.values() for c in columns
             if not _LETTERS.match(c)]
    numbers = [_column_number(grid, None, c) for cs in mapping.fields.values() for c in cs]
    for row in range(1, min(grid.max_row, HEADER_SEARCH_ROWS) + 1):
        keys = grid.row_keys(row, grid.max_column)
        if names and all(name in keys for name in names):
            return row
        if not names and all(n is not None and n <= len(keys) and keys[n - 1]
                             for n in numbers):
            return row
    return None


def _mapped_columns(grid: Rows, mapping: ColumnMapping, named_by: str = "that --columns names"
                    ) -> tuple[int, dict[str, list[int]]] | str:
    """The header row and each field's columns in one sheet, or why the sheet does not hold
    the mapping (words that finish a sentence)."""
    header_row = _mapped_header_row(grid, mapping)
    if header_row is None:
        names = [c for cs in mapping.fields.values() for c in cs if not _LETTERS.match(c)]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return (f"no row in the first {HEADER_SEARCH_ROWS} holds the headers {shown} "
                f"{named_by}" if names else f"no row in the first {HEADER_SEARCH_ROWS} holds a "
                f"text in every column {named_by.removeprefix('that ')}")
    columns: dict[str, list[int]] = {}
    for name, wanted in mapping.fields.items():
        for column in wanted:
            number = _column_number(grid, header_row, column)
            if number is None:
                found = [k for k in grid.row_keys(header_row, grid.max_column) if k]
                return (f"row {header_row} has no column headed '{column}' (headers found: "
                        f"{', '.join(found) or 'none'})")
            columns.setdefault(name, []).append(number)
    return header_row, columns


def _read_sheet(grid: Rows, header_row: int, columns: dict[str, list[int]], layout_name: str,
                id_pattern: re.Pattern[str] | None) -> LayoutRead:
    """The answers of one sheet under its mapped header row: every row with a question (and,
    with `id_pattern`, an id of that shape: section titles and notes between the questions
    are skipped); its answer the mapped columns joined, its criterion the criterion column's
    text or, without one, its question."""
    notes: list[str] = []
    answers: list[LayoutAnswer] = []
    unanswered: list[int] = []
    for row in range(header_row + 1, grid.max_row + 1):
        question = grid.text(row, columns["question"][0])
        if not question:
            continue
        identifier = " ".join(grid.text(row, c) for c in columns.get("id", [])).strip()
        if id_pattern is not None and not id_pattern.match(identifier):
            continue
        parts = [grid.text(row, column) for column in columns["answer"]]
        answer = joined_parts(parts)
        if not answer:
            unanswered.append(row)
            continue
        criterion = " ".join(grid.text(row, c) for c in columns.get("criterion", [])).strip()
        answers.append(LayoutAnswer(questionnaire_id=identifier, question=question,
                                    answer=answer, sheet=grid.title, row=row, extras={},
                                    criterion=criterion or None))
    if unanswered:
        notes.append(f"{note_prefix(grid.title)}{len(unanswered)} row(s) with a question have no "
                     f"answer and are not part of the round (rows "
                     f"{', '.join(map(str, unanswered[:8]))}"
                     f"{' and more' if len(unanswered) > 8 else ''}).")
    mapping_layout = Layout(key="mapped", family=layout_name, id_pattern=re.compile(".*"),
                            headers={}, required=())
    with_ids = [a for a in answers if a.questionnaire_id]
    if with_ids:
        answers = one_per_id(with_ids, notes) + [a for a in answers if not a.questionnaire_id]
        answers.sort(key=lambda a: a.row)
    return LayoutRead(layout=mapping_layout, name=layout_name, sheets=[grid.title],
                      answers=answers, notes=notes)


def joined_parts(parts: list[str]) -> str:
    """Mapped answer columns as one answer: 'Customer. Keys are rotated ...' (a status column
    and the vendor's text; a repeated part once)."""
    kept: list[str] = []
    for part in parts:
        if part and part not in kept:
            kept.append(part)
    text = ""
    for part in kept:
        text = joined_answer(text, part, None) if text else part
    return text


def read_mapped_sheets(grids: Sequence[Rows], mapping: ColumnMapping, layout_name: str, *,
                       id_pattern: re.Pattern[str] | None = None,
                       named_by: str = "that --columns names") -> LayoutRead:
    """Every sheet that holds the mapping's columns, read by it; the others are left out,
    each with why. An id answered on several sheets keeps each sheet's answer. Refused in one
    sentence when no sheet holds them."""
    reads: list[LayoutRead] = []
    left_out: list[tuple[str, str]] = []
    for grid in grids:
        found = _mapped_columns(grid, mapping, named_by)
        if isinstance(found, str):
            left_out.append((grid.title, found))
            continue
        reads.append(_read_sheet(grid, *found, layout_name, id_pattern))
    if not reads:
        if len(left_out) == 1:
            sheet, why = left_out[0]
            raise UserInputError(f"{note_prefix(sheet).lower()}{why}.")
        listed = "; ".join(f"{sheet}: {why}" for sheet, why in left_out)
        raise UserInputError(f"no sheet holds the columns --columns names ({listed}).")
    notes = [note for read in reads for note in read.notes]
    answers = one_per_id_per_sheet([a for read in reads for a in read.answers], notes)
    return LayoutRead(layout=reads[0].layout, name=layout_name,
                      sheets=[read.sheets[0] for read in reads], answers=answers, notes=notes,
                      left_out=left_out)
