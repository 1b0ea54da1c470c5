"""A table of question ids read without a workbook around it (printed in a PDF, published as
a web page): what each of its columns holds, and each row as an answer.

The header names the columns as a workbook's header does (the layouts of `layouts`); without a
standard header the id is the first column, the question the column named so (else the next),
the answer the column named so or whose cells begin Yes / No in half the rows at least, and
the columns after the answer that are notes or have no header its explanation. Other named
columns are kept by their headers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.ingest.rounds.answers import Layout, LayoutAnswer, joined_answer
from core.ingest.rounds.layouts import LAYOUTS
from core.ingest.rounds.tables import header_key

# A table without a standard header: the words naming its columns, and an answer's first word.
_QUESTION_HEADERS = ("question", "requirement", "control", "criteria", "criterion", "item")
_ANSWER_HEADERS = ("answer", "response", "reply", "yes/no", "compliant", "compliance",
                   "applicable")
_NOTE_HEADERS = ("note", "comment", "explanation", "additional", "detail", "remark",
                 "justification", "description", "evidence", "implementation", "clarification")
_ANSWER_WORDS = frozenset({"yes", "no", "n/a", "na", "not", "partial", "partially", "y", "n",
                           "true", "false", "planned", "compliant", "applicable"})


@dataclass(frozen=True)
class IdRow:
    """One row of the table: its question id, where it stands (a page, a section) and the
    text of each of its columns by number (the id's column is 0)."""

    identifier: str
    where: str  # "page 3", or "" where the table has no parts
    row: int
    cells: dict[int, str]


def standard_roles(headers: dict[int, str]) -> tuple[Layout, dict[int, str]] | None:
    """The standard layout the header names, and the field of each of its columns: "id",
    "question", "answer", "explanation", ... Compared without spaces, as a narrow column
    breaks "Question" into "Questi" over "on"."""
    keys = {column: "".join(header_key(text).split()) for column, text in headers.items()}
    for layout in LAYOUTS:
        if layout.choices:  # answers marked by an "x" under Yes / No: not read from a print
            continue
        roles: dict[int, str] = {}
        for name, accepted in layout.headers.items():
            wanted = {"".join(a.split()) for a in accepted}
            found = sorted(c for c, key in keys.items() if key in wanted and c not in roles)
            if not found:
                continue
            if name == "explanation":
                for number, column in enumerate(found, start=1):
                    roles[column] = "explanation" if number == 1 else f"explanation_{number}"
            else:
                roles[found[0]] = name
        for name, column in layout.fixed.items():
            if name not in roles.values() and column not in roles:
                roles[column] = name
        if all(name in roles.values() for name in ("id", *layout.required)):
            return layout, roles
    return None


def generic_roles(headers: dict[int, str], rows: Sequence[IdRow], count: int
                  ) -> dict[int, str] | None:
    """The fields of a table without a standard header (its columns 0 to `count` - 1, the
    id in column 0): see the module's description. None where no answer column is found."""
    keys = {column: header_key(text) for column, text in headers.items()}
    filled = [c for c in range(1, count) if any(r.cells.get(c) for r in rows)]
    if not filled:
        return None
    question = next((c for c in filled if any(h in keys.get(c, "") for h in _QUESTION_HEADERS)),
                    filled[0])
    later = [c for c in filled if c > question]
    answer = next((c for c in later if any(h in keys.get(c, "") for h in _ANSWER_HEADERS)),
                  None)
    if answer is None:
        scores = {c: sum(_first_word(r.cells.get(c, "")) in _ANSWER_WORDS for r in rows)
                  for c in later}
        best = max(later, key=lambda c: scores[c], default=None)
        if best is not None and scores[best] * 2 >= len(rows):
            answer = best
    if answer is None:
        return None
    roles = {0: "id", question: "question", answer: "answer"}
    notes = 0
    for column in later:
        key = keys.get(column, "")
        if column > answer and (not key or any(h in key for h in _NOTE_HEADERS)):
            notes += 1
            roles[column] = "explanation" if notes == 1 else f"explanation_{notes}"
        elif column != answer and key:
            roles[column] = key
    return roles


def _first_word(text: str) -> str:
    words = text.split()
    return words[0].lower().strip(".,;:!-") if words else ""


def row_answers(rows: Sequence[IdRow], roles: dict[int, str], layout: Layout | None
                ) -> tuple[list[LayoutAnswer], list[str]]:
    """Each row as an answer, its explanation joined after it; rows without a question or an
    answer are left out, and a note says which."""
    label = layout.answer_label if layout else None
    answers: list[LayoutAnswer] = []
    unanswered: list[str] = []
    unasked: list[str] = []
    for record in rows:
        texts = {role: record.cells[column] for column, role in roles.items()
                 if record.cells.get(column)}
        explanation = " ".join(texts[r] for r in sorted(texts) if r.startswith("explanation"))
        answer = joined_answer(texts.get("answer", ""), explanation, label)
        if not texts.get("question"):
            unasked.append(record.identifier)
        elif not answer:
            unanswered.append(record.identifier)
        else:
            extras = {role: text for role, text in texts.items()
                      if role not in ("id", "question", "answer")
                      and not role.startswith("explanation")
                      and (layout is None or role in layout.extras)}
            answers.append(LayoutAnswer(questionnaire_id=record.identifier,
                                        question=texts["question"], answer=answer,
                                        sheet=record.where, row=record.row, extras=extras))
    notes = []
    for ids, what in ((unanswered, "have no answer and are not part of the round"),
                      (unasked, "have no question text that could be read, and are left out")):
        if ids:
            shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            notes.append(f"{len(ids)} question(s) {what} ({shown}).")
    return answers, notes
