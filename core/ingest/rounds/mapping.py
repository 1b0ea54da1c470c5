"""A table of any other layout read by a column mapping (`--columns id=A,question=B,answer=C+E`):
each field read from the columns named by letter or by header text, below the header row."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import UserInputError
from core.ingest.rounds.answers import (
    Layout,
    LayoutAnswer,
    LayoutRead,
    joined_answer,
    note_prefix,
    one_per_id,
    row_place,
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


def read_mapped(grid: Rows, mapping: ColumnMapping, layout_name: str) -> LayoutRead:
    """The answers of one sheet read by a column mapping: below the header row, every row
    with a question; its answer the mapped columns joined, its criterion the criterion
    column's text or, without one, its question."""
    header_row = _mapped_header_row(grid, mapping)
    if header_row is None:
        names = [c for cs in mapping.fields.values() for c in cs if not _LETTERS.match(c)]
        what = (f"the headers {', '.join(names)} that --columns names" if names else
                "a text in every column --columns names")
        raise UserInputError(f"{note_prefix(grid.title).lower()}no row in the first "
                             f"{HEADER_SEARCH_ROWS} holds {what}.")
    columns: dict[str, list[int]] = {}
    for name, wanted in mapping.fields.items():
        for column in wanted:
            number = _column_number(grid, header_row, column)
            if number is None:
                found = [k for k in grid.row_keys(header_row, grid.max_column) if k]
                raise UserInputError(
                    f"{row_place(grid.title, header_row)}: no column is headed '{column}' "
                    f"(headers found: {', '.join(found) or 'none'}).")
            columns.setdefault(name, []).append(number)
    notes: list[str] = []
    answers: list[LayoutAnswer] = []
    unanswered: list[int] = []
    for row in range(header_row + 1, grid.max_row + 1):
        question = grid.text(row, columns["question"][0])
        if not question:
            continue
        parts = [grid.text(row, column) for column in columns["answer"]]
        answer = joined_answer(parts[0], " ".join(p for p in parts[1:] if p), None)
        if not answer:
            unanswered.append(row)
            continue
        identifier = " ".join(grid.text(row, c) for c in columns.get("id", [])).strip()
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
