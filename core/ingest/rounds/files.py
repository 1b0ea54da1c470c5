"""Round files read and validated before anything is written: JSON payloads as they are, .csv
and .xlsx spreadsheets and VSAQ answer files under the vendor, round and time given for
them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from core.errors import UserInputError, shown_path
from core.ingest import LoadedRound
from core.ingest.rounds.mapping import ColumnMapping
from core.ingest.rounds.payload import load_payload_file
from core.ingest.rounds.table_round import layout_round, load_spreadsheet_round
from core.ingest.rounds.tables import is_spreadsheet
from core.ingest.rounds.vsaq import read_answers, read_vsaq
from core.models import PayloadLimits, QuestionnairePayload


def load_json_rounds(files: Iterable[Path | str], limits: PayloadLimits
                     ) -> list[QuestionnairePayload]:
    """Every JSON round validated before any is written."""
    return [load_payload_file(Path(f), limits=limits) for f in files]


def load_rounds(files: Iterable[Path | str], limits: PayloadLimits, *,
                vendor_id: str | None = None, round_number: int | None = None,
                timestamp: str | None = None, columns: str | None = None) -> list[LoadedRound]:
    """Every round file validated before any is written; the vendor, round, time and column
    mapping apply to spreadsheets, and are refused for JSON rounds, which name their own."""
    files = [Path(f) for f in files]
    vsaq = {f: answers for f in files if not is_spreadsheet(f)
            for answers in [read_answers(f)] if answers is not None}
    sheets = [f for f in files if is_spreadsheet(f) or f in vsaq]
    mapping = ColumnMapping.parse(columns) if columns is not None else None
    given = [option for option, value in (("--vendor", vendor_id), ("--round", round_number),
                                          ("--timestamp", timestamp), ("--columns", columns))
             if value is not None]
    if not sheets and given:
        raise UserInputError(
            f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to "
            ".csv and .xlsx rounds and VSAQ answer files; a JSON round names its own vendor, "
            "round and time.")
    if sheets and (vendor_id is None or round_number is None):
        what = "a VSAQ answers file" if sheets[0] in vsaq else "a spreadsheet round"
        raise UserInputError(
            f"{shown_path(sheets[0])} is {what}; give --vendor and --round "
            "for it (and --timestamp for when it was answered, default now).")
    rounds = []
    for file in files:
        if is_spreadsheet(file):
            read = load_spreadsheet_round(file, vendor_id=vendor_id, round_number=round_number,
                                          timestamp=timestamp, limits=limits, columns=mapping)
            rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes)))
        elif file in vsaq:
            read = layout_round(shown_path(file), read_vsaq(file, vsaq[file]),
                                vendor_id=vendor_id, round_number=round_number,
                                timestamp=timestamp, limits=limits)
            rounds.append(LoadedRound(read.payload, shown_path(file), list(read.notes)))
        else:
            rounds.append(LoadedRound(load_payload_file(file, limits=limits), shown_path(file)))
    return rounds
