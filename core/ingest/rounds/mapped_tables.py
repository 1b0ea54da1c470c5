"""A table of no known layout, read by the reviewer's column mapping (`--columns`) or by a
guessed one, over every sheet that holds it: the sheets a workbook offers (`--sheet` chooses
among them), the sheets read and the sheets left out, each with why."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from core.errors import UserInputError
from core.ingest.rounds.answers import LayoutRead
from core.ingest.rounds.guess import ID_SHAPE, Guess, NoGuess, guess_sheet
from core.ingest.rounds.headers import TableSpec, has_columns, word_list
from core.ingest.rounds.mapping import ColumnMapping, read_mapped_sheets
from core.ingest.rounds.tables import (
    DELIMITERS,
    Grid,
    Rows,
    check_workbook_zip,
    csv_records,
    decode_csv,
    read_workbook,
)

GUESSED = "guessed"


def sheet_grids(name: str, data: bytes, sheets: Sequence[str] = ()
                ) -> tuple[list[Rows], list[str]]:
    """The table of a CSV file, or the visible sheets of a workbook (those `sheets` names,
    when given, hidden or not), each cell as a reader sees it; and the sheets not offered
    (hidden ones, or those --sheet did not choose)."""
    if Path(name).suffix.lower() == ".csv":
        if sheets:
            raise UserInputError(f"{name} is a CSV file, which has no sheets; --sheet applies "
                                 "to an .xlsx workbook.")
        text = decode_csv(name, data)
        first = text.split("\n", 1)[0]
        delimiter = max(DELIMITERS, key=first.count)
        try:
            return [Rows("", list(csv_records(text, delimiter)))], []
        except csv.Error:  # the headed reader names the row; there is nothing to guess from
            return [], []
    check_workbook_zip(name, data)
    formulas = read_workbook(name, data, read_only=False)
    values = read_workbook(name, data, read_only=False, data_only=True)
    titles = [sheet.title for sheet in values.worksheets]
    unknown = [s for s in sheets if s not in titles]
    if unknown:
        raise UserInputError(f"{name} has no sheet named '{unknown[0]}' (its sheets: "
                             f"{', '.join(titles)}).")
    chosen = [sheet for sheet in values.worksheets
              if (sheet.title in sheets if sheets else sheet.sheet_state == "visible")]
    if not chosen:
        raise UserInputError(f"{name} has no visible worksheet.")
    others = [s.title for s in values.worksheets if s not in chosen]
    return [Grid(formulas[sheet.title], sheet) for sheet in chosen], others


def is_headed(grids: Sequence[Rows], spec: TableSpec) -> bool:
    """True when a sheet's first non-blank row names the columns `spec` requires (or the
    sheet is named as the spec's own): a table the headed reader reads, not a guess."""
    for grid in grids:
        if grid.title.strip().lower() in spec.sheet_names:
            return True
        for row in range(1, grid.max_row + 1):
            texts = [grid.text_or_blank(row, c) for c in range(1, grid.max_column + 1)]
            if any(texts):
                if has_columns(texts, spec):
                    return True
                break
    return False


def mapped_table(name: str, grids: Sequence[Rows], mapping: ColumnMapping,
                 chosen: bool, others: Sequence[tuple[str, str]] = ()) -> LayoutRead:
    """A table read by the reviewer's mapping: every sheet with the headers it names. A
    mapping by letters alone reads the sheets chosen with --sheet, else the sheet named
    Answers, else the only visible sheet: letters fit any sheet, so a workbook's others
    (instructions, a cover) are left out rather than read as answers."""
    label = f"a table mapped by --columns {mapping.shown()}"
    if not mapping.by_header() and not chosen and len(grids) > 1:
        named = [g for g in grids if g.title.strip().lower() == "answers"]
        if not named:
            titles = ", ".join(g.title for g in grids)
            raise UserInputError(
                f"{name} has several sheets ({titles}) and --columns names columns by letter "
                "only; choose the sheet(s) to read with --sheet, or name the columns by their "
                "header text.")
        grids = named
    read = read_mapped_sheets(grids, mapping, label)
    return _with_sheets_noted(name, read, others)


def guessed_table(name: str, grids: Sequence[Rows], others: Sequence[tuple[str, str]] = ()
                  ) -> LayoutRead | list[NoGuess]:
    """A table read by a guessed mapping (the first sheet with a confident guess gives it;
    every sheet with its headers is read), or why no sheet's layout could be guessed."""
    guesses = [guess_sheet(grid) for grid in grids]
    confident = [g for g in guesses if isinstance(g, Guess)]
    if not confident:
        return [g for g in guesses if isinstance(g, NoGuess)]
    guess = confident[0]
    mapping = guess.by_header
    label = f"{GUESSED}: {guess.by_letter.shown()}"
    read = read_mapped_sheets(grids, mapping, label, id_pattern=ID_SHAPE,
                              named_by="of the guessed layout")
    notes = [f"Guessed the layout of {name}: {guess.described()}, below the header in row "
             f"{guess.header_row}{' of sheet ' + guess.sheet if guess.sheet else ''}; if it "
             f"is wrong, correct it with --columns {guess.by_letter.shown()} (in a package, "
             f"--columns \"{name}={guess.by_letter.shown()}\").", *read.notes]
    read = LayoutRead(layout=read.layout, name=label, sheets=read.sheets, answers=read.answers,
                      notes=notes, left_out=read.left_out, guessed=guess.by_letter.shown())
    return _with_sheets_noted(name, read, others)


def _with_sheets_noted(name: str, read: LayoutRead, others: Sequence[tuple[str, str]]
                       ) -> LayoutRead:
    """The read with the sheets not offered added to those left out, and a note naming
    them, when a workbook has any."""
    left_out = [*read.left_out, *others]
    if not left_out:
        return read
    left = "; ".join(f"{sheet} ({why})" for sheet, why in left_out)
    note = (f"{name}: read sheet(s) {word_list(read.sheets)}; left out {left}; choose "
            "sheets with --sheet.")
    return LayoutRead(layout=read.layout, name=read.name, sheets=read.sheets,
                      answers=read.answers, notes=[*read.notes, note], left_out=left_out,
                      guessed=read.guessed)


def no_guess_reason(reasons: Sequence[NoGuess]) -> str:
    """Why no layout was guessed, sheet by sheet, in words that finish a sentence."""
    return "; ".join(f"sheet {r.sheet}: {r.why}" if r.sheet else r.why for r in reasons[:4])
