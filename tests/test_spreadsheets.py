"""Questionnaire rounds and criteria lists read from .xlsx and .csv files: the same payload as a
JSON round, and every way a spreadsheet goes wrong refused in one sentence naming the file,
sheet, row and column."""

from __future__ import annotations

import csv
import io
import zipfile
from datetime import date, datetime
from typing import Any

import openpyxl
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.hashing import content_hash
from core.ingest.criteria_lists import load_criteria_file
from core.ingest.rounds.table_round import (
    SpreadsheetRound,
    load_spreadsheet_round,
    spreadsheet_round,
)
from core.ingest.rounds.tables import MAX_UNPACKED_BYTES, is_spreadsheet
from core.models import PayloadLimits, QuestionnairePayload
from tests.conftest import AES_CRITERION
from tests.support.sentences import one_sentence
from tests.support.snapshot import assert_unchanged, store_snapshot

HEADER = ["Criterion", "Question", "Answer"]
STAMP = "2024-03-01T09:00:00Z"
LIMITS = PayloadLimits()


def xlsx_bytes(rows: list[list[Any]], title: str = "Answers", setup=None) -> bytes:
    """A workbook of one sheet holding `rows` from A1; `setup(workbook, sheet)` adds the rest."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    if setup is not None:
        setup(workbook, sheet)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def csv_bytes(rows: list[list[str]], *, encoding: str = "utf-8-sig",
              delimiter: str = ",") -> bytes:
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode(encoding)


def read(name: str, data: bytes, **options: Any) -> SpreadsheetRound:
    arguments = {"vendor_id": "acme", "round_number": 2, "timestamp": STAMP, "limits": LIMITS}
    arguments.update(options)
    return spreadsheet_round(name, data, **arguments)


def refusal(name: str, data: bytes, **options: Any) -> str:
    with pytest.raises(UserInputError) as caught:
        read(name, data, **options)
    message = str(caught.value)
    assert one_sentence(message), message
    return message


def responses(round_: SpreadsheetRound) -> list[tuple[str | None, str, str]]:
    return [(r.criterion_question_text, r.question_text, r.answer_text)
            for r in round_.payload.responses]


# Reading a round -----------------------------------------------------------------------------


def test_xlsx_round_becomes_the_bulk_payload_with_rows_and_notes():
    data = xlsx_bytes([
        ["ID", "Criterion", "Question", "Answer", "Notes"],
        ["C-1", AES_CRITERION, "Please describe your encryption", "AES-256 with KMS.", "ok"],
        [],
        [None, None, "Do you have a BCP?", "Yes, tested yearly.", None],
        [None, None, None, None, "reviewed by Ann"],
    ])
    round_ = read("round_2.xlsx", data)
    assert round_.payload == QuestionnairePayload.model_validate({
        "vendor_id": "acme", "round_number": 2, "timestamp": STAMP,
        "responses": [
            {"criterion_question_text": AES_CRITERION,
             "question_text": "Please describe your encryption",
             "answer_text": "AES-256 with KMS."},
            {"criterion_question_text": None, "question_text": "Do you have a BCP?",
             "answer_text": "Yes, tested yearly."}]})
    assert round_.sheet == "Answers"
    assert round_.rows == [2, 4]
    assert round_.notes == [
        "Columns ID, Notes are not part of a questionnaire round and were ignored.",
        "Row 5 holds text only in ignored columns and was skipped.",
    ]
    assert round_.preview() == [
        {"row": 2, "criterion": AES_CRITERION, "question": "Please describe your encryption",
         "answer": "AES-256 with KMS."},
        {"row": 4, "criterion": None, "question": "Do you have a BCP?",
         "answer": "Yes, tested yearly."},
    ]


@pytest.mark.parametrize("header", [
    ["criterion", "question", "answer"],
    ["  CRITERION ", "Question", "ANSWER"],
    ["criterion_question_text", "question_text", "answer_text"],
    ["Criterion Question  Text", "question   text", "Answer_Text"],
    ["Criterion*", "Question *", "Answer*"],
])
def test_headers_are_found_whatever_their_case_spacing_underscores_or_trailing_asterisk(header):
    round_ = read("round_2.csv", csv_bytes([header, ["C", "Q", "A"]]))
    assert responses(round_) == [("C", "Q", "A")]


def test_header_is_the_first_non_blank_row_and_columns_may_be_in_any_order():
    data = xlsx_bytes([[], [None, None], ["Answer", "Question", "Criterion"], ["A", "Q", "C"]])
    round_ = read("round_2.xlsx", data)
    assert responses(round_) == [("C", "Q", "A")]
    assert round_.rows == [4]


def test_timestamp_none_is_the_current_utc_time_to_the_second():
    before = datetime.now().astimezone()
    round_ = read("round_2.csv", csv_bytes([HEADER, ["C", "Q", "A"]]), timestamp=None)
    stamp = round_.payload.timestamp
    assert len(stamp) == 20 and stamp.endswith("Z")
    assert abs((round_.payload.timestamp_utc - before).total_seconds()) < 60


def test_cells_that_are_not_text_are_read_as_the_text_excel_shows_with_a_note():
    data = xlsx_bytes([
        HEADER,
        ["C1", "When was the last audit?", date(2024, 3, 1)],
        ["C2", "When did the test start?", datetime(2024, 3, 1, 14, 30)],
        ["C3", "How many data centres?", 3.0],
        ["C4", "Uptime target?", 99.95],
        ["C5", "Is the service SOC 2 certified?", True],
        ["C6", 2024, "Yes"],
    ])
    round_ = read("round_2.xlsx", data)
    assert [r.answer_text for r in round_.payload.responses] == [
        "2024-03-01", "2024-03-01T14:30:00", "3", "99.95", "TRUE", "Yes"]
    assert round_.payload.responses[5].question_text == "2024"
    assert round_.notes == [
        "round_2.xlsx, sheet Answers, row 2, column Answer: the date was read as the text "
        "2024-03-01.",
        "round_2.xlsx, sheet Answers, row 3, column Answer: the date and time was read as the "
        "text 2024-03-01T14:30:00.",
        "round_2.xlsx, sheet Answers, row 6, column Answer: the true/false value was read as the "
        "text TRUE.",
    ]


def test_sheet_named_answers_is_read_whatever_the_other_sheets_hold():
    def setup(workbook, sheet):
        other = workbook.create_sheet("answers")
        other.append(HEADER)
        other.append(["C", "Q", "from the answers sheet"])

    data = xlsx_bytes([HEADER, ["C", "Q", "from the first sheet"]], title="Old", setup=setup)
    round_ = read("round_2.xlsx", data)
    assert round_.sheet == "answers"
    assert responses(round_) == [("C", "Q", "from the answers sheet")]
    assert "Read sheet answers; sheet(s) Old were not read." in round_.notes


def test_without_an_answers_sheet_the_only_sheet_with_the_columns_is_read():
    def setup(workbook, sheet):
        workbook.create_sheet("Round 2").append(HEADER)
        workbook["Round 2"].append(["C", "Q", "A"])

    data = xlsx_bytes([["Read me first"]], title="Cover", setup=setup)
    round_ = read("round_2.xlsx", data)
    assert round_.sheet == "Round 2"
    assert responses(round_) == [("C", "Q", "A")]


def test_several_sheets_with_the_columns_and_none_named_answers_are_refused():
    def setup(workbook, sheet):
        workbook.create_sheet("Second").append(HEADER)

    data = xlsx_bytes([HEADER, ["C", "Q", "A"]], title="First", setup=setup)
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx has several sheets with the columns criterion, question, answer "
        "(First, Second); name the one to read Answers.")


def test_workbook_without_any_sheet_holding_the_columns_is_refused_naming_its_sheets():
    def setup(workbook, sheet):
        workbook.create_sheet("Notes").append(["Some notes"])

    data = xlsx_bytes([["Question", "Answer"]], title="Sheet1", setup=setup)
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx has no sheet with the columns criterion, question, answer (sheets: "
        "Sheet1 with headers Question, Answer; Notes with headers Some notes); put them in a "
        "sheet named Answers, or map the columns with --columns (for example --columns "
        "id=A,question=B,answer=C+E).")


# Refusals: cells ------------------------------------------------------------------------------


def _rows_until(row: int, last: list[Any]) -> list[list[Any]]:
    """A header, answered rows, and `last` as spreadsheet row `row`."""
    body = [[f"Criterion {n}", f"Question {n}", f"Answer {n}"] for n in range(2, row)]
    return [HEADER, *body, last]


def test_blank_answer_is_refused_naming_file_sheet_row_and_column():
    data = xlsx_bytes(_rows_until(14, ["Criterion 14", "Question 14", "   "]))
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx, sheet Answers, row 14, column Answer: the answer is blank.")


def test_blank_question_is_refused_and_csv_names_no_sheet():
    data = csv_bytes(_rows_until(5, ["Criterion 5", "", "An answer"]))
    assert refusal("round_2.csv", data) == (
        "round_2.csv, row 5, column Question: the question is blank.")


def test_formula_cell_is_refused_asking_for_its_value():
    data = xlsx_bytes(_rows_until(3, ["Criterion 3", "Question 3", '=A3&" yes"']))
    assert refusal("round_2.xlsx", data) == (
        'round_2.xlsx, sheet Answers, row 3, column Answer: the cell holds a formula '
        '(=A3&" yes"); paste its value instead (Paste Special > Values).')


def test_text_that_only_looks_like_a_formula_is_read_as_text():
    def setup(workbook, sheet):
        sheet["C2"].data_type = "s"

    round_ = read("round_2.xlsx", xlsx_bytes([HEADER, ["C", "Q", "= 42 by contract"]],
                                             setup=setup))
    assert responses(round_) == [("C", "Q", "= 42 by contract")]


def test_error_value_is_refused():
    data = xlsx_bytes([HEADER, ["C", "Q", "#N/A"]])
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx, sheet Answers, row 2, column Answer: the cell holds the error value #N/A; "
        "type the text instead.")


def test_merged_header_cells_are_refused():
    data = xlsx_bytes([HEADER, ["C", "Q", "A"]], setup=lambda wb, ws: ws.merge_cells("A1:B1"))
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx, sheet Answers, row 1: the header row has merged cells (A1:B1); unmerge "
        "them so each column has its own header.")


def test_merged_answer_cells_are_refused():
    data = xlsx_bytes([HEADER, ["C1", "Q1", "Yes to both"], ["C2", "Q2", None]],
                      setup=lambda wb, ws: ws.merge_cells("C2:C3"))
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx, sheet Answers, row 2, column Answer: the cell is merged with others "
        "(C2:C3); unmerge it and give each row its own text.")


def test_merged_cells_in_ignored_columns_below_the_header_are_read():
    data = xlsx_bytes([HEADER + ["Notes"], ["C1", "Q1", "A1", "both"], ["C2", "Q2", "A2"]],
                      setup=lambda wb, ws: ws.merge_cells("D2:D3"))
    assert responses(read("round_2.xlsx", data)) == [("C1", "Q1", "A1"), ("C2", "Q2", "A2")]


def test_missing_column_is_named_with_the_headers_found():
    data = csv_bytes([["Criterion", "Question", "Response"], ["C", "Q", "A"]])
    assert refusal("round_2.csv", data) == (
        "round_2.csv, row 1: there is no answer column (headers found: Criterion, Question, "
        "Response); the first non-blank row must hold the headers criterion, question and "
        "answer; or map the columns with --columns (for example --columns "
        "id=A,question=B,answer=C+E).")


def test_two_columns_for_one_field_are_refused():
    data = csv_bytes([["Criterion", "Question", "Answer", "answer_text"], ["C", "Q", "A", "B"]])
    assert refusal("round_2.csv", data) == (
        "round_2.csv, row 1: two columns are headed answer (Answer in column C and answer_text "
        "in column D); keep one of them.")


def test_duplicate_criterion_and_question_names_both_rows():
    data = xlsx_bytes([HEADER, [AES_CRITERION, "Q", "A"], ["C", "Q", "A"],
                       [AES_CRITERION.upper(), "  q ", "B"]])
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx, sheet Answers, row 4, column Question: row 4 repeats the criterion and "
        "question of row 2; each question may appear once in a round.")


def test_text_over_the_payload_limits_names_the_cell():
    limits = PayloadLimits(max_answer_chars=20, max_question_chars=10)
    data = csv_bytes([HEADER, ["C", "Q", "short"], ["A criterion too long", "Q", "A"]])
    assert refusal("round_2.csv", data, limits=limits) == (
        "round_2.csv, row 3, column Criterion: the criterion is 20 characters long; at most 10 "
        "are allowed.")
    data = csv_bytes([HEADER, ["C", "Q", "x" * 21]])
    assert refusal("round_2.csv", data, limits=limits) == (
        "round_2.csv, row 2, column Answer: the answer is 21 characters long; at most 20 are "
        "allowed.")


def test_nul_character_in_a_csv_cell_is_refused_by_the_payload_rule():
    data = csv_bytes([HEADER, ["C", "Q", "A"], ["C", "Q2", "bad\x00byte"]])
    assert refusal("round_2.csv", data) == (
        "round_2.csv, row 3, column Answer: the answer contains a NUL character (at position 3).")


@pytest.mark.parametrize(("options", "expected"), [
    ({"vendor_id": "no spaces"},
     "--vendor 'no spaces' must be 1-63 letters, digits, '_' or '-', starting with a letter or "
     "digit."),
    ({"round_number": 0}, "--round must be 1 or more, not 0."),
    ({"timestamp": "yesterday"}, "--timestamp 'yesterday' is not an ISO 8601 date and time."),
])
def test_options_are_checked_by_the_payload_rules_and_named(options, expected):
    assert refusal("round_2.csv", csv_bytes([HEADER, ["C", "Q", "A"]]), **options) == expected


def test_a_spreadsheet_round_is_not_held_to_the_json_payloads_hundred_responses():
    rows = [HEADER] + [[f"C{n}", f"Q{n}", f"A{n}"] for n in range(261)]
    assert len(read("round_2.csv", csv_bytes(rows)).payload.responses) == 261
    assert len(read("round_2.csv", csv_bytes(rows[:5]),
                    limits=PayloadLimits(max_responses=3)).payload.responses) == 4


def test_ten_thousand_xlsx_rows_are_refused_before_they_are_read():
    data = xlsx_bytes([HEADER] + [[f"C{n}", f"Q{n}", f"A{n}"] for n in range(10_000)])
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx, sheet Answers holds 10,000 responses (rows 2 to 10,001); a spreadsheet "
        "round may hold at most 5,000 (the answers are committed in one write): split it into "
        "several files, which accumulate in the round.")


def test_ten_thousand_csv_rows_are_refused():
    data = csv_bytes([HEADER] + [[f"C{n}", f"Q{n}", f"A{n}"] for n in range(10_000)])
    assert refusal("round_2.csv", data).startswith("round_2.csv holds 10,000 responses")


def test_header_without_rows_is_refused():
    assert refusal("round_2.xlsx", xlsx_bytes([HEADER, [], []])) == (
        "round_2.xlsx, sheet Answers has a header row (row 1) but no rows below it; a "
        "questionnaire round needs at least one.")


# Refusals: files ------------------------------------------------------------------------------


def _with_member(data: bytes, name: str, content: bytes = b"") -> bytes:
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(name, content)
    return buffer.getvalue()


def test_macro_workbook_is_refused():
    data = _with_member(xlsx_bytes([HEADER, ["C", "Q", "A"]]), "xl/vbaProject.bin", b"\x00" * 64)
    assert refusal("round_2.xlsx", data) == (
        'round_2.xlsx contains macros (xl/vbaProject.bin); save it in Excel as a macro-free '
        '"Excel Workbook (.xlsx)" and try again.')


def test_encrypted_workbook_is_refused():
    ole = (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
           + "EncryptionInfo".encode("utf-16-le") + b"\x00" * 512
           + "EncryptedPackage".encode("utf-16-le"))
    assert refusal("round_2.xlsx", ole) == (
        "round_2.xlsx is password-protected (an encrypted workbook); remove the password in "
        "Excel (File > Info > Protect Workbook) and save it again as .xlsx.")


def test_old_xls_file_renamed_xlsx_is_refused():
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 1024 + "Workbook".encode("utf-16-le")
    assert refusal("round_2.xlsx", ole) == (
        "round_2.xlsx is an old-format Excel file (.xls), not an .xlsx workbook; open it in "
        "Excel and save it as .xlsx.")


@pytest.mark.parametrize("data", [
    b"criterion,question,answer\n",
    xlsx_bytes([HEADER, ["C", "Q", "A"]])[:400],
    b"",
])
def test_damaged_workbook_is_refused(data):
    assert refusal("round_2.xlsx", data) == (
        "round_2.xlsx is not a readable .xlsx workbook (it is damaged or not an Excel file); "
        "open it in Excel and save it again as .xlsx.")


def test_zip_without_a_workbook_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "not a workbook")
    assert refusal("round_2.xlsx", buffer.getvalue()) == (
        "round_2.xlsx is not a readable .xlsx workbook (it is damaged or not an Excel file); "
        "open it in Excel and save it again as .xlsx.")


def test_workbook_with_a_damaged_part_is_refused():
    source = zipfile.ZipFile(io.BytesIO(xlsx_bytes([HEADER, ["C", "Q", "A"]])))
    buffer = io.BytesIO()
    with source, zipfile.ZipFile(buffer, "w") as archive:
        for member in source.infolist():
            damaged = member.filename == "xl/worksheets/sheet1.xml"
            archive.writestr(member, b"<not xml" if damaged else source.read(member))
    data = buffer.getvalue()
    assert refusal("round_2.xlsx", data).startswith("round_2.xlsx is not a readable .xlsx")


def test_zip_bomb_is_refused_before_it_is_unpacked():
    buffer = io.BytesIO(xlsx_bytes([HEADER, ["C", "Q", "A"]]))
    with zipfile.ZipFile(buffer, "a", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("xl/media/image1.png", "w", force_zip64=True) as member:
        block = b"\x00" * 1_000_000
        for _ in range(MAX_UNPACKED_BYTES // len(block) + 1):
            member.write(block)
    data = buffer.getvalue()
    assert len(data) < 1_000_000
    message = refusal("round_2.xlsx", data)
    assert message.startswith("round_2.xlsx unpacks to 101,")
    assert message.endswith(f"a workbook may unpack to at most {MAX_UNPACKED_BYTES:,} (copy the "
                            "answers into a new workbook and save that).")


def test_file_over_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "round_2.csv"
    data = csv_bytes([HEADER, ["C", "Q", "x" * 200]])
    path.write_bytes(data)
    with pytest.raises(UserInputError) as caught:
        load_spreadsheet_round(path, vendor_id="acme", round_number=2, timestamp=STAMP,
                               limits=PayloadLimits(max_bytes=100))
    assert str(caught.value) == (
        f"{path} is {len(data)} bytes; a questionnaire round may be at most 100 bytes.")


# CSV encodings and separators ------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-8"])
def test_csv_utf8_with_or_without_bom(encoding):
    data = csv_bytes([HEADER, ["Chiffrement?", "Clé gérée?", "Oui — AES‑256 “KMS”"]],
                     encoding=encoding)
    assert responses(read("round_2.csv", data)) == [
        ("Chiffrement?", "Clé gérée?", "Oui — AES‑256 “KMS”")]


def test_excel_unicode_text_utf16_tab_separated():
    data = csv_bytes([HEADER, ["Crit ✓", "Q", "Réponse"]], encoding="utf-16", delimiter="\t")
    assert data.startswith(b"\xff\xfe")
    round_ = read("round_2.csv", data)
    assert responses(round_) == [("Crit ✓", "Q", "Réponse")]
    assert round_.notes == ["The columns are separated by tabs."]


def test_semicolon_separated_csv_and_commas_inside_cells():
    data = csv_bytes([HEADER, ["C", "Q", "Yes, since 2019, audited"]], delimiter=";")
    assert responses(read("round_2.csv", data)) == [("C", "Q", "Yes, since 2019, audited")]


def test_windows_1252_csv_is_refused_naming_the_byte():
    data = csv_bytes([HEADER, ["C", "Q", "It’s encrypted"]], encoding="cp1252")
    assert refusal("round_2.csv", data) == (
        "round_2.csv is not UTF-8 text (byte 0x92 at offset 33 cannot be decoded); save it from "
        'Excel as "CSV UTF-8 (Comma delimited)" and try again.')


def test_utf16_without_bom_is_refused():
    data = csv_bytes([HEADER, ["C", "Q", "A"]], encoding="utf-16-le")
    assert refusal("round_2.csv", data).startswith(
        "round_2.csv holds a NUL character in its first line (character 1), as UTF-16 text "
        "without a byte-order mark does;")


def test_workbook_named_csv_is_refused():
    assert refusal("round_2.csv", xlsx_bytes([HEADER, ["C", "Q", "A"]])) == (
        'round_2.csv is an Excel workbook, not CSV text; name it .xlsx, or save it from Excel '
        'as "CSV UTF-8 (Comma delimited)" and try again.')


@pytest.mark.parametrize(("data", "expected"), [
    (b"", "round_2.csv is empty; a questionnaire round needs a header row."),
    (b"\xef\xbb\xbf\r\n  \r\n", "round_2.csv is empty; a questionnaire round needs a header row."),
    (b",,\r\n , \r\n", "round_2.csv holds no text in any cell; a questionnaire round needs a "
                        "header row."),
])
def test_empty_csv_is_refused(data, expected):
    assert refusal("round_2.csv", data) == expected


def test_quoted_multi_line_cells_keep_rows_numbered_as_excel_shows_them():
    text = ('Criterion,Question,Answer\r\n'
            'C1,Q1,"First line\r\nsecond line"\r\n'
            '\r\n'
            'C2,Q2,\r\n')
    assert refusal("round_2.csv", text.encode()) == (
        "round_2.csv, row 4, column Answer: the answer is blank.")
    round_ = read("round_2.csv", text.replace("C2,Q2,", "C2,Q2,A2").encode())
    assert round_.rows == [2, 4]
    assert round_.payload.responses[0].answer_text == "First line\r\nsecond line"


def test_unclosed_quote_is_refused_naming_the_row():
    data = b'Criterion,Question,Answer\r\nC1,Q1,A1\r\nC2,Q2,"never closed\r\n'
    assert refusal("round_2.csv", data) == (
        "round_2.csv, row 3: the row cannot be read as CSV (a quoted cell is never closed).")


def test_separator_the_header_holds_equally_both_ways_is_refused():
    data = b"criterion;question;answer;,criterion,question,answer\r\nx\r\n"
    assert refusal("round_2.csv", data) == (
        "round_2.csv: the header row reads as the columns criterion, question, answer when "
        "split at commas and semicolons alike, so the separator is ambiguous; save it from "
        'Excel as "CSV UTF-8 (Comma delimited)" and try again.')


def test_not_a_spreadsheet_name():
    assert is_spreadsheet("round_2.XLSX") and is_spreadsheet("a/b/round.csv")
    assert not is_spreadsheet("round_2.json") and not is_spreadsheet("round_2.xls")
    assert refusal("round_2.ods", b"x") == "round_2.ods is not a .csv or .xlsx file."


# The store -------------------------------------------------------------------------------------


def test_round_from_disk_ingests_and_a_refused_file_leaves_the_store_unchanged(
        workbench, tmp_path):
    good = tmp_path / "round_2.xlsx"
    good.write_bytes(xlsx_bytes([HEADER, [AES_CRITERION, "Encryption?", "AES-256."]]))
    round_ = load_spreadsheet_round(good, vendor_id="acme", round_number=2, timestamp=STAMP,
                                    limits=LIMITS)
    assert workbench.ingest_questionnaire(round_.payload).indexed_count == 1
    linked = workbench.linked_followups("acme", AES_CRITERION)
    assert [(h.round_number, h.answer_text) for h in linked] == [(2, "AES-256.")]

    before = store_snapshot(workbench)
    bad = tmp_path / "round_3.xlsx"
    bad.write_bytes(xlsx_bytes([HEADER, [AES_CRITERION, "New?", "Yes."], ["C", "Q", ""]]))
    with pytest.raises(UserInputError) as caught:
        workbench.ingest_questionnaire(load_spreadsheet_round(
            bad, vendor_id="acme", round_number=3, timestamp=STAMP, limits=LIMITS).payload)
    assert str(caught.value) == f"{bad}, sheet Answers, row 3, column Answer: the answer is blank."
    assert_unchanged(before, store_snapshot(workbench))


# Property: a payload written as a spreadsheet reads back as itself ------------------------------

_cell_text = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cc", "Cn"), include_characters="\n"),
    min_size=1, max_size=40,
).filter(lambda s: s == s.strip() and bool(s))


@st.composite
def payloads(draw) -> QuestionnairePayload:
    count = draw(st.integers(min_value=1, max_value=20))
    responses_, keys = [], set()
    for _ in range(count):
        criterion = draw(st.one_of(st.none(), _cell_text))
        question = draw(_cell_text)
        key = content_hash(criterion, question)
        if key in keys:
            continue
        keys.add(key)
        responses_.append({"criterion_question_text": criterion, "question_text": question,
                           "answer_text": draw(_cell_text)})
    return QuestionnairePayload.model_validate({
        "vendor_id": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,10}", fullmatch=True)),
        "round_number": draw(st.integers(min_value=1, max_value=50)),
        "timestamp": STAMP, "responses": responses_})


def _payload_rows(payload: QuestionnairePayload) -> list[list[str | None]]:
    return [HEADER] + [[r.criterion_question_text, r.question_text, r.answer_text]
                       for r in payload.responses]


def _payload_xlsx(payload: QuestionnairePayload) -> bytes:
    def as_text(workbook, sheet):
        for row in sheet.iter_rows():
            for cell in row:
                if cell.value is not None:
                    cell.data_type = "s"  # text as typed, even "=..." or "1.0"

    return xlsx_bytes(_payload_rows(payload), setup=as_text)


def _payload_csv(payload: QuestionnairePayload) -> bytes:
    return csv_bytes([[cell or "" for cell in row] for row in _payload_rows(payload)])


@hypothesis_settings(max_examples=40, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads())
def test_any_payload_written_as_xlsx_or_csv_reads_back_the_same(payload):
    written = (("round.xlsx", _payload_xlsx(payload)), ("round.csv", _payload_csv(payload)))
    for name, data in written:
        round_ = read(name, data, vendor_id=payload.vendor_id, round_number=payload.round_number,
                      timestamp=payload.timestamp)
        assert round_.payload == payload, name
        assert round_.rows == list(range(2, len(payload.responses) + 2))


# Criteria lists ----------------------------------------------------------------------------------


def test_text_criteria_file_is_one_criterion_per_line(tmp_path):
    path = tmp_path / "criteria.txt"
    path.write_text(f"{AES_CRITERION}\n\n  Is MFA enforced?  \n")
    assert load_criteria_file(path, max_chars=2000) == [
        CriterionEntry(AES_CRITERION), CriterionEntry("Is MFA enforced?")]


def test_csv_criteria_with_ids_and_edited_questions(tmp_path):
    path = tmp_path / "criteria.csv"
    path.write_bytes(csv_bytes([
        ["ID", "Criterion", "Question", "Owner"],
        ["ENC-1", AES_CRITERION, "How do you encrypt stored data?", "Ann"],
        ["", "Is MFA enforced?", "", ""],
        ["", "", "", "a stray note"],
        ["LOG-2", "Are logs kept a year?", "Are logs kept a year?", ""],
    ]))
    assert load_criteria_file(path, max_chars=2000) == [
        CriterionEntry(AES_CRITERION, id="ENC-1", question="How do you encrypt stored data?"),
        CriterionEntry("Is MFA enforced?"),
        CriterionEntry("Are logs kept a year?", id="LOG-2"),
    ]


def test_xlsx_criteria_need_only_a_criterion_column(tmp_path):
    path = tmp_path / "criteria.xlsx"
    path.write_bytes(xlsx_bytes([["criterion"], [AES_CRITERION], [None], ["Is MFA enforced?"]],
                                title="Criteria"))
    assert load_criteria_file(path, max_chars=2000) == [
        CriterionEntry(AES_CRITERION), CriterionEntry("Is MFA enforced?")]


def _criteria_refusal(tmp_path, name: str, data: bytes, max_chars: int = 2000) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(UserInputError) as caught:
        load_criteria_file(path, max_chars=max_chars)
    return str(caught.value).replace(f"{tmp_path}/", "")


def test_criteria_refusals_name_the_file_sheet_row_and_column(tmp_path):
    duplicate_ids = xlsx_bytes([["ID", "Criterion"], ["A-1", "One?"], ["A-1", "Two?"]],
                               title="Criteria")
    assert _criteria_refusal(tmp_path, "criteria.xlsx", duplicate_ids) == (
        "criteria.xlsx, sheet Criteria, row 3, column ID: the id A-1 is already used in row 2; "
        "each id must be unique.")
    blank = csv_bytes([["id", "criterion"], ["A-1", "One?"], ["A-2", ""]])
    assert _criteria_refusal(tmp_path, "criteria.csv", blank) == (
        "criteria.csv, row 3, column criterion: the criterion is blank.")
    long = csv_bytes([["criterion"], ["x" * 30]])
    assert _criteria_refusal(tmp_path, "criteria.csv", long, max_chars=20) == (
        "criteria.csv, row 2, column criterion: the criterion is 30 characters long; at most 20 "
        "are allowed.")
    no_column = csv_bytes([["Requirement"], ["One?"]])
    assert _criteria_refusal(tmp_path, "criteria.csv", no_column) == (
        "criteria.csv, row 1: there is no criterion column (headers found: Requirement); the "
        "first non-blank row must hold the headers criterion.")
    formula = xlsx_bytes([["criterion"], ["=B2"]], title="List")
    assert _criteria_refusal(tmp_path, "criteria.xlsx", formula) == (
        "criteria.xlsx, sheet List, row 2, column criterion: the cell holds a formula (=B2); "
        "paste its value instead (Paste Special > Values).")


def test_empty_criteria_lists_are_refused(tmp_path):
    assert _criteria_refusal(tmp_path, "criteria.csv", csv_bytes([["criterion"], [""]])) == (
        "criteria.csv has a header row (row 1) but no rows below it; a criteria list needs at "
        "least one.")
    assert _criteria_refusal(tmp_path, "criteria.txt", b"\n  \n") == (
        "criteria.txt holds no criteria (one per line).")
