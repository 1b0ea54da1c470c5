"""Standard security questionnaires as vendors send them: which layout a workbook has, and
its answers with their question ids.

A layout is recognised by its header texts, wherever the header row is (a title row above
it, a header repeated at each section as the HECVAT does). Data rows are the rows below a
header whose id cell has the layout's question-id form; everything else (section titles,
instructions, vendor contact rows, "End of Standard", copyright lines) is not an answer and
is skipped. Formulas are read through the value the workbook stores with them (the
HECVAT's question cells are VLOOKUPs into a hidden sheet); a formula with no stored value is
refused, naming the cell. A merged cell is read as its value down its first column (the
CAIQ's CCM columns span a control's questions) and as blank across (a HECVAT answer merged
over the Additional Information column is read once).

A layout gives each answer: its question id, question, answer text (the answer with its
explanation: "Yes. Keys are rotated ..."), sheet and row, and the layout's extra columns
(control ownership, CCM control id) as metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from openpyxl.utils import get_column_letter

from core.errors import UserInputError

# How far down a sheet a header row is looked for: a title block, instructions, a vendor's
# contact rows come first in the HECVAT (its first header row is row 24).
HEADER_SEARCH_ROWS = 40


def header_key(value: object) -> str:
    """A header as compared: lower case, spacing and underscores folded, a trailing
    asterisk dropped."""
    text = "" if value is None else str(value)
    return " ".join(text.replace("_", " ").lower().split()).rstrip("*").strip()


@dataclass(frozen=True)
class Layout:
    """One standard questionnaire layout: the header texts that name its columns."""

    key: str  # "caiq-v4"
    family: str  # "CAIQ", shown with the version found in the workbook
    id_pattern: re.Pattern[str]
    # field -> the header texts naming it (compared by header_key); the fields are "id",
    # "question", "answer", "explanation" and the extras
    headers: dict[str, tuple[str, ...]]
    required: tuple[str, ...]  # fields whose header must be in the header row
    # field -> 0-based column, where the layout has no header for it (HECVAT: id in A,
    # question in B)
    fixed: dict[str, int] = field(default_factory=dict)
    extras: tuple[str, ...] = ()  # fields kept as metadata, by their names here
    # Answer columns marked with an "x" under a Yes / No / Not Applicable sub-header (CAIQ v3)
    choices: tuple[str, ...] = ()
    answer_label: str | None = None  # "Applicable" for a statement of applicability
    sheet_pattern: re.Pattern[str] | None = None  # a sheet this layout may be read from
    several_sheets: bool = False  # answers on every sheet with the header (HECVAT 4)


_CAIQ_ID = re.compile(r"^[A-Z&]{2,4}-\d{2}\.\d+$")
_HECVAT_ID = re.compile(r"^[A-Z]{2,4}-\d{2}$")
_SIG_ID = re.compile(r"^(?:[A-V](?:\.\d+){1,4}|\d+\.\d+\.\d+)$")
_ISO_ID = re.compile(r"^(?:A\.?)?\d{1,2}(?:\.\d{1,2}){1,2}$")

LAYOUTS: tuple[Layout, ...] = (
    Layout(
        key="caiq-v4", family="CAIQ", id_pattern=_CAIQ_ID,
        headers={
            "id": ("question id",),
            "question": ("question",),
            "answer": ("csp caiq answer",),
            "explanation": ("csp implementation description (optional/recommended)",
                            "csp implementation description"),
            "control_ownership": ("ssrm control ownership",),
            "csc_responsibilities": ("csc responsibilities (optional/recommended)",
                                     "csc responsibilities"),
            "ccm_control_id": ("ccm control id",),
            "ccm_control_title": ("ccm control title",),
            "ccm_domain": ("ccm domain title",),
        },
        required=("id", "question", "answer"),
        extras=("control_ownership", "csc_responsibilities", "ccm_control_id",
                "ccm_control_title", "ccm_domain"),
    ),
    Layout(
        key="caiq-v3", family="CAIQ", id_pattern=_CAIQ_ID,
        headers={
            "id": ("question id",),
            "question": ("consensus assessment questions",),
            "explanation": ("notes",),
            "control_id": ("control id",),
            "control_domain": ("control domain",),
        },
        required=("id", "question"),
        extras=("control_id", "control_domain"),
        choices=("yes", "no", "not applicable", "na", "n/a"),
    ),
    Layout(
        key="hecvat-3", family="HECVAT", id_pattern=_HECVAT_ID,
        headers={
            "answer": ("vendor answers", "vendor answer"),
            "explanation": ("additional information",),
        },
        required=("answer", "explanation"),
        fixed={"id": 0, "question": 1},
        sheet_pattern=re.compile(r"^(HECVAT - (Full|Lite)|CoSN K-12CVAT)", re.IGNORECASE),
    ),
    Layout(
        key="hecvat-4", family="HECVAT", id_pattern=_HECVAT_ID,
        headers={
            "answer": ("answer",),
            "explanation": ("additional information",),
            "guidance": ("guidance",),
        },
        required=("answer", "explanation", "guidance"),
        fixed={"id": 0, "question": 1},
        several_sheets=True,
    ),
    Layout(
        key="sig", family="SIG", id_pattern=_SIG_ID,
        headers={
            "id": ("question original identifier", "ques num", "question number"),
            "question": ("question text", "question/request", "question"),
            "answer": ("question answer", "response", "answer"),
            "explanation": ("question comment", "additional information", "comments",
                            "comment"),
            "section": ("section heading",),
            "control": ("control heading",),
            "export_id": ("question identifier",),
        },
        required=("id", "question", "answer"),
        extras=("section", "control", "export_id"),
    ),
    Layout(
        key="iso27001-soa", family="ISO 27001 statement of applicability",
        id_pattern=_ISO_ID,
        headers={
            "id": ("control reference", "control number", "control id", "control ref",
                   "control"),
            "question": ("control title", "control name", "title"),
            "answer": ("applicable (yes/no)", "applicability (yes/no)", "applicable",
                       "applicability"),
            "explanation": ("justification", "justification for inclusion",
                            "justification/implementation", "implementation summary",
                            "justification for exclusion", "reason for exclusion",
                            "remarks"),
            "status": ("implementation status", "status", "implemented"),
            "owner": ("control owner", "owner"),
            "evidence": ("related document / evidence", "evidence"),
        },
        required=("id", "question", "answer"),
        extras=("status", "owner", "evidence"),
        answer_label="Applicable",
    ),
)


@dataclass(frozen=True)
class LayoutAnswer:
    """One answered question of a standard questionnaire."""

    questionnaire_id: str
    question: str
    answer: str  # the answer with its explanation, as it is indexed
    sheet: str
    row: int
    extras: dict[str, str]
    criterion: str | None = None  # the linked criterion where the table names one, else
    # the question itself


@dataclass(frozen=True)
class LayoutRead:
    """What a workbook of a standard layout holds."""

    layout: Layout
    name: str  # "CAIQ v4.0.3", "HECVAT Full 3.04"
    sheets: list[str]
    answers: list[LayoutAnswer]
    notes: list[str]


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


def _at(sheet: str, row: int) -> str:
    """'sheet CAIQv4.0.3, row 12', or 'row 12' in a CSV file (a table without sheets)."""
    return f"sheet {sheet}, row {row}" if sheet else f"row {row}"


def _note_prefix(sheet: str) -> str:
    return f"Sheet {sheet}: " if sheet else ""


def _formula_text(value: object) -> str:
    text = getattr(value, "text", value)
    text = str(text)
    return text if len(text) <= 60 else f"{text[:57]}..."


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


@dataclass(frozen=True)
class _Header:
    row: int
    columns: dict[str, int]  # field -> 1-based column
    choices: dict[int, str]  # 1-based column -> the answer it marks ("Yes")


def _match_header(layout: Layout, keys: Sequence[str]) -> dict[str, int] | None:
    """field -> 1-based column, when the row holds every required header of the layout. A
    column counts for one field only; further explanation columns (a statement of
    applicability's Justification and Implementation Summary) are `explanation_2`, ..."""
    columns: dict[str, int] = {}
    taken: set[int] = set()
    for name, accepted in layout.headers.items():
        found = [keys.index(accept) + 1 for accept in accepted if accept in keys]
        found = [column for column in found if column not in taken]
        if not found:
            continue
        if name == "explanation":
            for number, column in enumerate(sorted(found)):
                columns["explanation" if number == 0 else f"explanation_{number + 1}"] = column
                taken.add(column)
            continue
        columns[name] = found[0]  # the first accepted text found wins (most specific first)
        taken.add(found[0])
    if not all(name in columns for name in layout.required):
        return None
    for name, column in layout.fixed.items():
        columns.setdefault(name, column + 1)
    return columns


def _choices_below(grid: Rows, layout: Layout, row: int, width: int) -> dict[int, str]:
    """CAIQ v3: the Yes / No / Not Applicable sub-headers within three rows below the
    header."""
    for below in range(row + 1, min(row + 4, grid.max_row + 1)):
        keys = grid.row_keys(below, width)
        found = {column + 1: grid.text(below, column + 1) for column, key in enumerate(keys)
                 if key in layout.choices}
        if len(found) >= 2:
            return found
    return {}


def find_headers(grid: Rows, layout: Layout) -> list[_Header]:
    """Every header row of `layout` in the sheet: the first within the first rows, and for
    a layout that repeats its header at each section (the HECVAT), every one after it."""
    width = grid.max_column
    headers: list[_Header] = []
    for row in range(1, grid.max_row + 1):
        if not headers and row > HEADER_SEARCH_ROWS:
            break
        columns = _match_header(layout, grid.row_keys(row, width))
        if columns is None:
            continue
        choices = _choices_below(grid, layout, row, width) if layout.choices else {}
        if layout.choices and not choices:
            continue
        headers.append(_Header(row=row, columns=columns, choices=choices))
        if not layout.key.startswith("hecvat"):
            break  # one header per sheet
    return headers


def _joined(answer: str, explanation: str, label: str | None) -> str:
    """'Yes. Keys are rotated ...': the answer and its explanation as one text."""
    answer = answer.strip()
    explanation = explanation.strip()
    if label and answer:
        answer = f"{label}: {answer}"
    if not explanation or explanation == answer:
        return answer
    if not answer:
        return explanation
    end = "" if answer[-1] in ".!?:;" else "."
    return f"{answer}{end} {explanation}"


def _rows(grid: Rows, layout: Layout, headers: list[_Header]) -> Iterator[tuple[int, _Header]]:
    """(row, the header it is under) for every row below a header, to the sheet's end."""
    for at, header in enumerate(headers):
        end = headers[at + 1].row if at + 1 < len(headers) else grid.max_row + 1
        for row in range(header.row + 1, end):
            yield row, header


def read_sheet(grid: Rows, layout: Layout, headers: list[_Header],
               notes: list[str]) -> list[LayoutAnswer]:
    """The answers of one sheet, read under its header rows."""
    answers: list[LayoutAnswer] = []
    unanswered: list[str] = []
    for row, header in _rows(grid, layout, headers):
        columns = header.columns
        identifier = grid.text(row, columns["id"])
        if not layout.id_pattern.match(identifier):
            continue  # a section title, an instruction, a footer: not an answer
        question = grid.text(row, columns["question"])
        if header.choices:
            marked = [label for column, label in header.choices.items()
                      if grid.text(row, column)]
            answer = " / ".join(marked)
        else:
            answer = grid.text(row, columns["answer"]) if "answer" in columns else ""
        explanation = " ".join(
            text for text in (grid.text(row, column) for name, column in columns.items()
                              if name.startswith("explanation")) if text)
        text = _joined(answer, explanation, layout.answer_label)
        if not question:
            raise UserInputError(
                f"{_at(grid.title, row)}: question {identifier} has no question text "
                f"(column {get_column_letter(columns['question'])}).")
        if not text:
            unanswered.append(identifier)
            continue
        extras = {}
        for name in layout.extras:
            if name in columns:
                value = grid.text(row, columns[name])
                if value:
                    extras[name] = value
        answers.append(LayoutAnswer(questionnaire_id=identifier, question=question,
                                    answer=text, sheet=grid.title, row=row, extras=extras))
    if unanswered:
        shown = ", ".join(unanswered[:8]) + (f" and {len(unanswered) - 8} more"
                                             if len(unanswered) > 8 else "")
        notes.append(f"{_note_prefix(grid.title)}{len(unanswered)} question(s) have no answer and "
                     f"are not part of the round ({shown}).")
    return answers


# Whole workbooks ------------------------------------------------------------------------------

_VERSION = re.compile(r"(?:^|\bversion\s+|^v)(\d+(?:\.\d+){1,2})\b", re.IGNORECASE)


def _version(grid: Rows) -> str | None:
    """The questionnaire's version as its title rows state it ("Version 3.04", "v4.0.3")."""
    for row in range(1, min(3, grid.max_row) + 1):
        for column in range(1, min(grid.max_column, 8) + 1):
            try:
                text = grid.text(row, column)
            except UserInputError:
                continue
            match = _VERSION.search(text)
            if match:
                return match.group(1)
    return None


def _layout_name(layout: Layout, grids: list[Rows]) -> str:
    first = grids[0]
    sheet_version = re.search(r"v(\d+(?:\.\d+)+)", first.title)
    version = sheet_version.group(1) if sheet_version else _version(first)
    if layout.key.startswith("caiq"):
        return f"CAIQ v{version}" if version else "CAIQ"
    if layout.key == "hecvat-3":
        title = first.title.lower()
        if title.startswith("cosn"):
            kind = "CoSN K-12CVAT Lite" if "lite" in first.text(1, 1).lower() else "CoSN K-12CVAT"
        else:
            kind = "HECVAT Lite" if "lite" in title else "HECVAT Full"
        return f"{kind} {version}" if version else kind
    if layout.key == "hecvat-4":
        return f"HECVAT {version}" if version else "HECVAT 4"
    if layout.key == "sig":
        return f"SIG questionnaire ({first.title})"
    return layout.family


def recognise(sheets: Sequence[Rows], layouts: Sequence[Layout] = LAYOUTS
              ) -> tuple[Layout, list[tuple[Rows, list[_Header]]]] | None:
    """The first standard layout any sheet has, and the sheets (with their header rows) its
    answers are on; None when no sheet has one."""
    for layout in layouts:
        found: list[tuple[Rows, list[_Header]]] = []
        for grid in sheets:
            if layout.sheet_pattern is not None and not layout.sheet_pattern.match(grid.title):
                continue
            headers = find_headers(grid, layout)
            if headers:
                found.append((grid, headers))
                if not layout.several_sheets:
                    break
        if found:
            return layout, found
    return None


def read_layout(sheets: Sequence[Rows], layouts: Sequence[Layout] = LAYOUTS
                ) -> LayoutRead | None:
    """The answers of a workbook of a standard layout, or None when it has none."""
    recognised = recognise(sheets, layouts)
    if recognised is None:
        return None
    layout, found = recognised
    notes: list[str] = []
    answers: list[LayoutAnswer] = []
    for grid, headers in found:
        answers.extend(read_sheet(grid, layout, headers, notes))
    answers = _one_per_id(answers, notes)
    return LayoutRead(layout=layout, name=_layout_name(layout, [g for g, _ in found]),
                      sheets=[g.title for g, _ in found], answers=answers, notes=notes)


def _one_per_id(answers: list[LayoutAnswer], notes: list[str]) -> list[LayoutAnswer]:
    """An id answered twice alike is kept once; answered differently, the workbook is
    refused: which answer is the vendor's cannot be told."""
    seen: dict[str, LayoutAnswer] = {}
    kept: list[LayoutAnswer] = []
    for answer in answers:
        earlier = seen.get(answer.questionnaire_id)
        if earlier is None:
            seen[answer.questionnaire_id] = answer
            kept.append(answer)
        elif (earlier.answer, earlier.question) != (answer.answer, answer.question):
            raise UserInputError(
                f"{_at(answer.sheet, answer.row)}: question {answer.questionnaire_id} "
                f"is answered again, differently from row {earlier.row} of sheet "
                f"{earlier.sheet or 'the file'}; keep one of the two answers.")
        else:
            notes.append(f"{_at(answer.sheet, answer.row).capitalize()} repeats question "
                         f"{answer.questionnaire_id} of row {earlier.row} word for word; it "
                         "was read once.")
    return kept


# A table of any other layout, read by a column mapping ---------------------------------------

MAPPED_FIELDS = ("id", "criterion", "question", "answer")
_LETTERS = re.compile(r"^[A-Z]{1,3}$")


@dataclass(frozen=True)
class ColumnMapping:
    """`--columns id=A,question=B,answer=C+E`: field -> the columns it is read from, each a
    column letter or a header text; `+` joins columns (an answer and its explanation)."""

    fields: dict[str, tuple[str, ...]]

    @classmethod
    def parse(cls, text: str) -> ColumnMapping:
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
        raise UserInputError(f"{_note_prefix(grid.title).lower()}no row in the first "
                             f"{HEADER_SEARCH_ROWS} holds {what}.")
    columns: dict[str, list[int]] = {}
    for name, wanted in mapping.fields.items():
        for column in wanted:
            number = _column_number(grid, header_row, column)
            if number is None:
                found = [k for k in grid.row_keys(header_row, grid.max_column) if k]
                raise UserInputError(
                    f"{_at(grid.title, header_row)}: no column is headed '{column}' "
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
        answer = _joined(parts[0], " ".join(p for p in parts[1:] if p), None)
        if not answer:
            unanswered.append(row)
            continue
        identifier = " ".join(grid.text(row, c) for c in columns.get("id", [])).strip()
        criterion = " ".join(grid.text(row, c) for c in columns.get("criterion", [])).strip()
        answers.append(LayoutAnswer(questionnaire_id=identifier, question=question,
                                    answer=answer, sheet=grid.title, row=row, extras={},
                                    criterion=criterion or None))
    if unanswered:
        notes.append(f"{_note_prefix(grid.title)}{len(unanswered)} row(s) with a question have no "
                     f"answer and are not part of the round (rows "
                     f"{', '.join(map(str, unanswered[:8]))}"
                     f"{' and more' if len(unanswered) > 8 else ''}).")
    mapping_layout = Layout(key="mapped", family=layout_name, id_pattern=re.compile(".*"),
                            headers={}, required=())
    with_ids = [a for a in answers if a.questionnaire_id]
    if with_ids:
        answers = _one_per_id(with_ids, notes) + [a for a in answers if not a.questionnaire_id]
        answers.sort(key=lambda a: a.row)
    return LayoutRead(layout=mapping_layout, name=layout_name, sheets=[grid.title],
                      answers=answers, notes=notes)
