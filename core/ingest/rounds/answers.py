"""What a questionnaire read by its layout gives (a standard layout, a `--columns` mapping, a
VSAQ answers file): the layout, each answered question with its id, sheet and row, and the
rules every such reader shares (an answer joined with its explanation, an id answered once)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from core.errors import UserInputError


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
    id_from: str | None = None  # a field whose "5.10: title" text gives the row's id
    # Each sheet answers every id for itself (an on-premises and a cloud sheet): an id is
    # answered once per sheet, and its answers are told apart by their sheets.
    answers_per_sheet: bool = False


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
    by_sheet: bool = False  # the file answers this id on another sheet too


@dataclass(frozen=True)
class LayoutRead:
    """What a workbook of a standard layout holds."""

    layout: Layout
    name: str  # "CAIQ v4.0.3", "HECVAT Full 3.04"
    sheets: list[str]
    answers: list[LayoutAnswer]
    notes: list[str]
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (sheet, why)
    guessed: str | None = None  # the guessed mapping, as --columns takes it (letters)


def row_place(sheet: str, row: int) -> str:
    """'sheet CAIQv4.0.3, row 12', or 'row 12' in a CSV file (a table without sheets)."""
    return f"sheet {sheet}, row {row}" if sheet else f"row {row}"


def note_prefix(sheet: str) -> str:
    """'Sheet CAIQv4.0.3: ' to begin a note about a sheet, or nothing in a CSV file."""
    return f"Sheet {sheet}: " if sheet else ""


def joined_answer(answer: str, explanation: str, label: str | None) -> str:
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


def one_per_id_per_sheet(answers: list[LayoutAnswer], notes: list[str]
                         ) -> list[LayoutAnswer]:
    """`one_per_id` within each sheet; an id answered on several sheets (an on-premises and
    a hosted sheet) keeps each sheet's answer, marked so, told apart by its sheet."""
    by_sheet: dict[str, list[LayoutAnswer]] = {}
    for answer in answers:
        by_sheet.setdefault(answer.sheet, []).append(answer)
    kept = [a for sheet_answers in by_sheet.values() for a in one_per_id(sheet_answers, notes)]
    sheets_of: dict[str, set[str]] = {}
    for answer in kept:
        sheets_of.setdefault(answer.questionnaire_id, set()).add(answer.sheet)
    return [replace(a, by_sheet=True) if a.questionnaire_id and len(
        sheets_of[a.questionnaire_id]) > 1 else a for a in kept]


def one_per_id(answers: list[LayoutAnswer], notes: list[str]) -> list[LayoutAnswer]:
    """A question of one id answered twice alike is kept once; answered differently, the
    workbook is refused: which answer is the vendor's cannot be told. Several questions under
    one id (a 2022 control mapped from several 2013 controls) are several answers."""
    seen: dict[tuple[str, str], LayoutAnswer] = {}
    kept: list[LayoutAnswer] = []
    for answer in answers:
        key = (answer.questionnaire_id, answer.question)
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = answer
            kept.append(answer)
        elif (earlier.answer, earlier.question) != (answer.answer, answer.question):
            raise UserInputError(
                f"{row_place(answer.sheet, answer.row)}: question {answer.questionnaire_id} "
                f"is answered again, differently from row {earlier.row} of sheet "
                f"{earlier.sheet or 'the file'}; keep one of the two answers.")
        else:
            notes.append(f"{row_place(answer.sheet, answer.row).capitalize()} repeats question "
                         f"{answer.questionnaire_id} of row {earlier.row} word for word; it "
                         "was read once.")
    return kept
