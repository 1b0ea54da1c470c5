"""Standard security questionnaires as vendors send them (CAIQ, HECVAT, SIG, an ISO 27001
statement of applicability): which layout a workbook has, and its answers with their question
ids.

A layout is recognised by its header texts, wherever the header row is (a title above it, a
header repeated at each section as the HECVAT does). Data rows are the rows below a header
whose id cell has the layout's question-id form; section titles, instructions and footers are
skipped. Each answer keeps the layout's extra columns (control ownership, CCM control id) as
metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from openpyxl.utils import get_column_letter

from core.controls.answers import control_question
from core.errors import UserInputError
from core.ingest.rounds.answers import (
    Layout,
    LayoutAnswer,
    LayoutRead,
    joined_answer,
    note_prefix,
    one_per_id,
    one_per_id_per_sheet,
    row_place,
)
from core.ingest.rounds.tables import HEADER_SEARCH_ROWS, Rows

CAIQ_ID = re.compile(r"^[A-Z&]{2,4}-\d{2}\.\d+$")
HECVAT_ID = re.compile(r"^[A-Z]{2,4}-\d{2}$")
SIG_ID = re.compile(r"^(?:[A-V](?:\.\d+){1,4}|\d+\.\d+\.\d+)$")
ISO_ID = re.compile(r"^(?:A\.?)?\d{1,2}(?:\.\d{1,2}){1,2}$")
# A NIST SP 800-53 control as FedRAMP's workbooks write it: "AC-2", "AC-02 (01)", a part
# "AC-1(a)", an enhancement's part "AC-2(1)(a)".
NIST_CONTROL_ID = re.compile(r"^[A-Z]{2}-\d{1,2}(?:\s?\((?:\d{1,2}|[a-z])\))*$")

LAYOUTS: tuple[Layout, ...] = (
    Layout(
        key="caiq-v4", family="CAIQ", id_pattern=CAIQ_ID,
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
        key="caiq-v3", family="CAIQ", id_pattern=CAIQ_ID,
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
        key="hecvat-3", family="HECVAT", id_pattern=HECVAT_ID,
        headers={
            "answer": ("vendor answers", "vendor answer"),
            "explanation": ("additional information",),
        },
        required=("answer", "explanation"),
        fixed={"id": 0, "question": 1},
        sheet_pattern=re.compile(r"^(HECVAT - (Full|Lite)|CoSN K-12CVAT)", re.IGNORECASE),
    ),
    Layout(
        key="hecvat-4", family="HECVAT", id_pattern=HECVAT_ID,
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
        key="sig", family="SIG", id_pattern=SIG_ID,
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
        id_pattern=ISO_ID,
        headers={
            # A statement mapping the 2013 Annex A to the 2022 controls is read by its 2022
            # ids; the 2013 id is kept beside each answer.
            "id": ("iso/iec 27001:2022 clause controls", "iso/iec 27001:2022 annex a controls",
                   "iso/iec 27001:2022 controls", "iso/iec 27001:2022 control",
                   "control reference", "control number", "control id", "control ref",
                   "control"),
            "question": ("control title", "control name", "title", "control",
                         "control description"),
            "answer": ("applicable (yes/no)", "applicability (yes/no)", "applicable (n or y)",
                       "applicable (y or n)", "applicable (y/n)", "applicable", "applicability"),
            "explanation": ("justification", "justification for inclusion",
                            "justification/implementation", "implementation summary",
                            "selection justification/execution - explanation",
                            "selection justification", "justification for exclusion",
                            "reason for exclusion", "remarks"),
            "status": ("implementation status", "status", "implemented",
                       "implemented (full, partial, not at all)"),
            "owner": ("control owner", "owner"),
            "evidence": ("related document / evidence", "evidence"),
            "control_title": ("iso/iec 27001:2022 clause titles",
                              "iso/iec 27001:2022 control titles"),
            "iso_2013": ("iso/iec 27001:2013 annex a controls", "iso/iec 27001:2013 controls",
                         "iso/iec 27001:2013 control"),
            "third_party": ("controlled by 3rd party", "controlled by third party"),
            "third_party_name": ("3rd party name", "third party name"),
        },
        required=("id", "question", "answer"),
        extras=("status", "owner", "evidence", "control_title", "iso_2013", "third_party",
                "third_party_name"),
        answer_label="Applicable",
        # "5.10: Acceptable use ...": the id a title begins with is the one the reader sees
        # (a 2022 id saved as a number reads 5.1 for 5.10).
        id_from="control_title",
    ),
    Layout(
        # FedRAMP's customer responsibility matrix (SSP Appendix J): one row per control or
        # control part, whether the customer inherits it, and who does what. A vendor sends
        # one sheet per offering (on-premises, cloud), each answering every control.
        key="fedramp-crm", family="FedRAMP customer responsibility matrix",
        id_pattern=NIST_CONTROL_ID,
        headers={
            "id": ("control id",),
            "answer": ("can be inherited from csp",),
            "explanation": ("specific inheritance and customer agency/csp responsibilities",),
        },
        required=("id", "answer", "explanation"),
        answer_label="Can be inherited from the CSP",
        several_sheets=True,
        answers_per_sheet=True,
    ),
)


_TITLED_ID = re.compile(r"^\s*((?:A\.)?\d{1,2}(?:\.\d{1,2}){1,2})\s*:")
_YES_NO = {"y": "Yes", "n": "No", "yes": "Yes", "no": "No"}
_MARKED = {"y", "yes", "x", "true"}


# What a vendor types into a Yes / No / Not Applicable column instead of an "x": the word is
# the answer, whichever column it was typed in ("NO" in the Yes column is a no).
_CHOICE_WORDS = {"yes": "Yes", "y": "Yes", "no": "No", "n": "No", "not": "Not Applicable",
                 "na": "Not Applicable", "n/a": "Not Applicable",
                 "not applicable": "Not Applicable"}
_MARK_LENGTH = 3  # "x", "X", a tick: a mark; anything longer that is no answer word is a note


def _chosen(grid: Rows, row: int, choices: dict[int, str]) -> tuple[str, list[str]]:
    """The answer marked under Yes / No / Not Applicable sub-headers, and any note typed
    into those columns instead of a mark."""
    marked: list[str] = []
    notes: list[str] = []
    for column, label in choices.items():
        text = grid.text(row, column)
        if not text:
            continue
        word = _CHOICE_WORDS.get(" ".join(text.lower().split()))
        if word is not None or len(text) <= _MARK_LENGTH:
            answer = word or label
            if answer not in marked:
                marked.append(answer)
        else:
            notes.append(text)
    return " / ".join(marked), notes


def _third_party(text: str, extras: dict[str, str]) -> str:
    """A statement of applicability's control run by a third party, said in its answer: a
    reviewer reads who operates it ("Controlled by a third party: AWS.")."""
    if extras.get("third_party", "").strip().lower() not in _MARKED:
        return text
    who = extras.get("third_party_name") or "yes"
    return joined_answer(text, f"Controlled by a third party: {who}.", None)


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
        if layout.id_from and layout.id_from in columns:
            titled = _TITLED_ID.match(grid.text(row, columns[layout.id_from]))
            if titled and layout.id_pattern.match(titled.group(1)):
                identifier = titled.group(1)
        if not layout.id_pattern.match(identifier):
            continue  # a section title, an instruction, a footer: not an answer
        # A matrix keyed by control ids asks no question of its own: the control is it.
        question = (grid.text(row, columns["question"]) if "question" in columns
                    else control_question(identifier))
        noted: list[str] = []
        if header.choices:
            answer, noted = _chosen(grid, row, header.choices)
        else:
            answer = grid.text(row, columns["answer"]) if "answer" in columns else ""
        explanation = " ".join(dict.fromkeys(  # a text in two explanation columns once
            text for text in [*(grid.text(row, column) for name, column in columns.items()
                                if name.startswith("explanation")), *noted] if text))
        if layout.answer_label:
            answer = _YES_NO.get(answer.strip().lower(), answer)
        text = joined_answer(answer, explanation, layout.answer_label)
        if not question:
            raise UserInputError(
                f"{row_place(grid.title, row)}: question {identifier} has no question text "
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
        text = _third_party(text, extras)
        answers.append(LayoutAnswer(questionnaire_id=identifier, question=question,
                                    answer=text, sheet=grid.title, row=row, extras=extras))
    if unanswered:
        shown = ", ".join(unanswered[:8]) + (f" and {len(unanswered) - 8} more"
                                             if len(unanswered) > 8 else "")
        notes.append(f"{note_prefix(grid.title)}{len(unanswered)} question(s) have no answer and "
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
    answers = (one_per_id_per_sheet(answers, notes) if layout.answers_per_sheet
               else one_per_id(answers, notes))
    return LayoutRead(layout=layout, name=_layout_name(layout, [g for g, _ in found]),
                      sheets=[g.title for g, _ in found], answers=answers, notes=notes)
