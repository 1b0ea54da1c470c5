"""Criteria lists, read in one place: text with one criterion per line, or a .csv or .xlsx
table with a criterion column and optional id, question, questionnaire_ids and controls
columns, from
a file on disk or from an upload's bytes; and the lists used with a vendor, kept in its
store so the dashboard offers the vendor's own criteria."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.controls.mappings import parse_controls
from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.hashing import criterion_hash, short_hash
from core.ingest import decode_utf8, read_user_file, refuse_too_large, shown_path
from core.ingest.rounds.headed_tables import read_table
from core.ingest.rounds.headers import TableSpec
from core.ingest.rounds.tables import is_spreadsheet
from core.store import EvidenceStore

# A thousand criteria at the longest a criterion may be; a criteria file is a short list.
MAX_CRITERIA_FILE_BYTES = 2_000_000
# A criteria list is a short list; a spreadsheet of more rows is refused before it is read.
MAX_CRITERIA_ROWS = 10_000


def _criteria_too_many(where: str, count: int, first: int, last: int, most: int) -> str:
    return (f"{where} holds {count:,} criteria (rows {first:,} to {last:,}); a criteria list "
            f"may hold at most {most:,}.")


_CRITERIA_SPEC = TableSpec(
    what="a criteria list",
    fields={"id": ("id",), "criterion": ("criterion", "criterion question text"),
            "question": ("question", "question text"),
            "questionnaire_ids": ("questionnaire ids", "questionnaire id"),
            "controls": ("controls", "control", "control ids", "control id")},
    required=("criterion",),
    sheet_names=("criteria",),
    max_rows=MAX_CRITERIA_ROWS,
    too_many=_criteria_too_many,
)


def criteria_lines(text: str, *, max_chars: int | None = None,
                   where: str | None = None) -> list[str]:
    """One criterion per line, blank lines skipped; a line holding a NUL or longer than
    max_chars is refused, by its number (in `where`, when given)."""
    criteria = []
    for number, line in enumerate(text.splitlines(), start=1):
        criterion = line.strip()
        if not criterion:
            continue
        place = f"{where} line {number}" if where else f"Line {number}"
        if "\x00" in criterion:
            raise UserInputError(f"{place} contains a NUL character.")
        if max_chars is not None and len(criterion) > max_chars:
            raise UserInputError(
                f"{place} is {len(criterion):,} characters long; a criterion may be at most "
                f"{max_chars:,}.")
        criteria.append(criterion)
    return criteria


def load_criteria(path: Path, *, max_chars: int | None = None) -> list[str]:
    """One criterion per line, blank lines skipped; every line is checked before any is used,
    so a bad line late in the file refuses the file before anything is printed."""
    text = decode_utf8(path, read_user_file(path, max_bytes=MAX_CRITERIA_FILE_BYTES,
                                            what="a criteria file"))
    criteria = criteria_lines(text, max_chars=max_chars, where=shown_path(path))
    if not criteria:
        raise UserInputError(f"{shown_path(path)} holds no criteria (one per line).")
    return criteria


def load_criteria_file(path: Path | str, *, max_chars: int) -> list[CriterionEntry]:
    """A criteria list: a .csv or .xlsx file with a criterion column (and optional id and
    question columns), or any other file with one criterion per line."""
    path = Path(path)
    if not is_spreadsheet(path):
        return [CriterionEntry(text) for text in load_criteria(path, max_chars=max_chars)]
    name = shown_path(path)
    raw = read_user_file(path, max_bytes=MAX_CRITERIA_FILE_BYTES, what="a criteria file")
    return criteria_from_spreadsheet(name, raw, max_chars=max_chars)


def read_uploaded_criteria(name: str, data: bytes, *, max_chars: int) -> list[CriterionEntry]:
    """A criteria list from an upload: a .csv or .xlsx file with a criterion column (and
    optional id and question columns), or text with one criterion per line."""
    shown = shown_path(name)
    if is_spreadsheet(name):
        return criteria_from_spreadsheet(shown, data, max_chars=max_chars)
    refuse_too_large(shown, len(data), MAX_CRITERIA_FILE_BYTES, "a criteria file")
    criteria = criteria_lines(decode_utf8(shown, data), max_chars=max_chars, where=shown)
    if not criteria:
        raise UserInputError(f"{shown} holds no criteria (one per line).")
    return [CriterionEntry(text) for text in criteria]


def criteria_from_spreadsheet(name: str, data: bytes, *, max_chars: int) -> list[CriterionEntry]:
    """The criteria of a .csv or .xlsx file's bytes (an upload, or a file read from disk)."""
    refuse_too_large(name, len(data), MAX_CRITERIA_FILE_BYTES, "a criteria file")
    _, layout, rows = read_table(name, data, _CRITERIA_SPEC, [])
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
        given = "controls" in layout.columns
        controls = tuple(link.id for link in parse_controls(
            row.cells.get("controls") or "", layout.place(row.number, "controls"))
        ) if given else ()
        entries.append(CriterionEntry(criterion, id=entry_id,
                                      question=None if question == criterion else question,
                                      questionnaire_ids=mapped, controls=controls,
                                      controls_given=given))
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


# The lists used with a vendor --------------------------------------------------------------

def remember_criteria(store: EvidenceStore, vendor_id: str, name: str,
                      criteria: Sequence[CriterionEntry]) -> None:
    """Keep a criteria list as used with the vendor (its file name and its criteria), so the
    dashboard offers its criteria for that vendor; the same list used again replaces itself,
    and an unchanged one is not written again."""
    if not criteria:
        return
    records = store.criteria_lists(vendor_id, create=True)
    record_id = "list-" + short_hash(name)
    data = json.dumps([{"text": c.text, "id": c.id, "question": c.question,
                        "questionnaire_ids": list(c.questionnaire_ids),
                        "controls": list(c.controls)} for c in criteria])
    if any(i == record_id and text == data for i, text, _meta in records.all()):
        return
    records.upsert(record_id, data, {"vendor_id": vendor_id, "name": name,
                                     "used_at": datetime.now(UTC).isoformat(timespec="seconds")})


def remembered_criteria(store: EvidenceStore, vendor_id: str) -> list[CriterionEntry]:
    """Every criterion of the lists used with the vendor, the most recently used list first,
    each criterion once (by its hash)."""
    records = store.criteria_lists(vendor_id)
    if records is None:
        return []
    found: dict[str, CriterionEntry] = {}
    for _id, text, _meta in sorted(records.all(), key=lambda r: str(r[2].get("used_at", "")),
                                   reverse=True):
        for item in json.loads(text or "[]"):
            entry = CriterionEntry(str(item["text"]), item.get("id"), item.get("question"),
                                   tuple(item.get("questionnaire_ids") or ()),
                                   tuple(item.get("controls") or ()))
            found.setdefault(criterion_hash(entry.text), entry)
    return list(found.values())
