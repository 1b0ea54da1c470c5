"""Drafting the next questionnaire round: one row per criterion with the rounds that already
answered it, written as .xlsx, .csv or .json, and once answered ingested and linked back to
the criterion."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import openpyxl
import pytest

from core.criteria import CriterionEntry
from core.errors import UnknownVendorError, UserInputError
from core.hashing import criterion_hash
from core.ingest.criteria_lists import load_criteria_file
from core.ingest.rounds.payload import parse_payload_bytes
from core.ingest.rounds.table_round import spreadsheet_round
from core.models import PayloadLimits
from core.outputs.draft import DraftRow, draft_format, plan_draft, write_draft
from tests.conftest import AES_CRITERION
from tests.support import payloads
from tests.support.snapshot import assert_unchanged, store_snapshot

MFA_CRITERION = "Does the vendor enforce multi-factor authentication for administrators?"
LOG_CRITERION = "Does the vendor retain security logs for at least one year?"
MFA_QUESTION = "Which second factor do your administrators use to sign in?"


@pytest.fixture
def answered(workbench):
    """A vendor whose round 1 answered the AES criterion (and one ad-hoc question)."""
    workbench.ingest_questionnaire(payloads.round_payload(1, [
        payloads.response("Please describe your encryption",
                          "We use AES-256 for all data at rest.", AES_CRITERION),
        payloads.response("Do you have a BCP?", "Yes."),
    ], timestamp="2024-01-15T10:30:00Z"))
    return workbench


CRITERIA = [
    CriterionEntry(AES_CRITERION, id="ENC-1"),
    CriterionEntry(MFA_CRITERION, id="IAM-2", question=MFA_QUESTION),
    CriterionEntry(LOG_CRITERION),
]


# Planning -------------------------------------------------------------------------------------


def test_plan_has_one_row_per_criterion_with_the_rounds_that_answered_it(answered):
    rows = plan_draft(answered, "acme", CRITERIA)
    assert [row.model_dump() for row in rows] == [
        {"id": "ENC-1", "criterion": AES_CRITERION, "criterion_hash": criterion_hash(AES_CRITERION),
         "question": AES_CRITERION, "answered_rounds": [1], "answer": ""},
        {"id": "IAM-2", "criterion": MFA_CRITERION, "criterion_hash": criterion_hash(MFA_CRITERION),
         "question": MFA_QUESTION, "answered_rounds": [], "answer": ""},
        {"id": None, "criterion": LOG_CRITERION, "criterion_hash": criterion_hash(LOG_CRITERION),
         "question": LOG_CRITERION, "answered_rounds": [], "answer": ""},
    ]


def test_only_unanswered_keeps_the_criteria_without_a_linked_answer(answered):
    rows = plan_draft(answered, "acme", CRITERIA, only_unanswered=True)
    assert [row.criterion for row in rows] == [MFA_CRITERION, LOG_CRITERION]


def test_answers_from_several_rounds_are_listed_once_each_in_order(answered):
    for round_number in (3, 2, 3):
        answered.ingest_questionnaire(payloads.round_payload(
            round_number, [payloads.response(f"Follow-up {round_number}", "Still AES-256.",
                                             AES_CRITERION.upper())],
            timestamp=f"2024-{round_number:02d}-01T00:00:00Z"))
    (row,) = plan_draft(answered, "acme", CRITERIA[:1])
    assert row.answered_rounds == [1, 2, 3]


def test_criteria_with_the_same_hash_collapse_into_the_first(answered):
    rows = plan_draft(answered, "acme", [
        CriterionEntry(MFA_CRITERION, id="first"),
        CriterionEntry("  " + MFA_CRITERION.upper().replace(" ", "   ") + " ", id="second"),
        CriterionEntry(LOG_CRITERION),
    ])
    assert [(row.id, row.criterion) for row in rows] == [
        ("first", MFA_CRITERION), (None, LOG_CRITERION)]


def test_unknown_vendor_is_refused_as_every_read_is(answered):
    with pytest.raises(UnknownVendorError) as caught:
        plan_draft(answered, "globex", CRITERIA)
    assert str(caught.value).startswith("No evidence is stored for vendor 'globex' in the ")


def test_nothing_left_to_ask_is_refused(answered):
    with pytest.raises(UserInputError) as caught:
        plan_draft(answered, "acme", CRITERIA[:1], only_unanswered=True)
    assert str(caught.value) == (
        "Every criterion given already has a linked answer from vendor 'acme'; draft without "
        "--only-unanswered to ask again.")
    with pytest.raises(UserInputError, match="There are no criteria to draft a round for."):
        plan_draft(answered, "acme", [])


# Writing ---------------------------------------------------------------------------------------


def _rows() -> list[DraftRow]:
    return [
        DraftRow(id="ENC-1", criterion=AES_CRITERION,
                 criterion_hash=criterion_hash(AES_CRITERION), question=AES_CRITERION),
        DraftRow(criterion=MFA_CRITERION, criterion_hash=criterion_hash(MFA_CRITERION),
                 question=MFA_QUESTION),
    ]


def test_xlsx_draft_has_an_answers_sheet_to_fill_and_instructions():
    data = write_draft(_rows(), vendor_id="acme", round_number=4, fmt="xlsx")
    book = openpyxl.load_workbook(io.BytesIO(data))
    assert book.sheetnames == ["Answers", "Instructions"]
    sheet = book["Answers"]
    assert [[cell.value for cell in row] for row in sheet.iter_rows()] == [
        ["ID", "Criterion", "Question", "Answer"],
        ["ENC-1", AES_CRITERION, AES_CRITERION, None],
        [None, MFA_CRITERION, MFA_QUESTION, None],
    ]
    assert all(cell.font.bold for cell in sheet[1])
    assert sheet.freeze_panes == "A2"
    assert [sheet.column_dimensions[c].width for c in "ABCD"] == [14, 60, 60, 80]
    assert sheet["D2"].alignment.wrap_text and sheet["B3"].alignment.wrap_text
    instructions = " ".join(str(c.value) for c in book["Instructions"]["A"] if c.value)
    assert "vendor acme, round 4" in instructions
    assert "Answer column (column D)" in instructions
    assert "Do not edit the Criterion column (column B)" in instructions


def test_id_column_only_when_a_row_has_an_id():
    rows = [row.model_copy(update={"id": None}) for row in _rows()]
    book = openpyxl.load_workbook(io.BytesIO(write_draft(rows, vendor_id="acme",
                                                         round_number=2, fmt="xlsx")))
    assert [cell.value for cell in book["Answers"][1]] == ["Criterion", "Question", "Answer"]
    text = write_draft(rows, vendor_id="acme", round_number=2, fmt="csv").decode("utf-8-sig")
    assert text.splitlines()[0] == "Criterion,Question,Answer"


def test_csv_draft_is_utf8_with_a_bom_and_the_same_columns():
    data = write_draft(_rows(), vendor_id="acme", round_number=2, fmt="csv")
    assert data.startswith(b"\xef\xbb\xbf")
    records = list(csv.reader(io.StringIO(data[3:].decode("utf-8"), newline="")))
    assert records == [
        ["ID", "Criterion", "Question", "Answer"],
        ["ENC-1", AES_CRITERION, AES_CRITERION, ""],
        ["", MFA_CRITERION, MFA_QUESTION, ""],
    ]


def test_json_draft_is_the_bulk_payload_that_validates_once_answered():
    before = datetime.now(UTC).replace(microsecond=0)
    data = write_draft(_rows(), vendor_id="acme", round_number=2, fmt="json")
    payload = json.loads(data)
    assert payload["vendor_id"] == "acme" and payload["round_number"] == 2
    assert datetime.fromisoformat(payload["timestamp"]) >= before
    assert payload["responses"] == [
        {"criterion_question_text": AES_CRITERION, "question_text": AES_CRITERION,
         "answer_text": ""},
        {"criterion_question_text": MFA_CRITERION, "question_text": MFA_QUESTION,
         "answer_text": ""},
    ]
    with pytest.raises(UserInputError) as caught:
        parse_payload_bytes("round_2.json", data)
    assert str(caught.value) == "round_2.json: field responses[0].answer_text is blank."


@pytest.mark.parametrize(("name", "fmt"), [("next.xlsx", "xlsx"), ("out/NEXT.CSV", "csv"),
                                           ("round.json", "json")])
def test_draft_format_follows_the_file_ending(name, fmt):
    assert draft_format(name) == fmt


def test_other_endings_are_refused():
    with pytest.raises(UserInputError) as caught:
        draft_format("next_round.xls")
    assert str(caught.value) == (
        "next_round.xls: a draft is written as .xlsx, .csv or .json; name the output file with "
        "one of these endings.")


@pytest.mark.parametrize(("options", "expected"), [
    ({"vendor_id": "two words"}, "Vendor id 'two words' is not valid"),
    ({"round_number": 0}, "--round must be between 1 and 1000, not 0."),
    ({"fmt": "ods"}, "A draft is written as xlsx, csv or json, not 'ods'."),
])
def test_bad_draft_options_are_refused(options, expected):
    arguments = {"vendor_id": "acme", "round_number": 2, "fmt": "xlsx", **options}
    with pytest.raises(UserInputError) as caught:
        write_draft(_rows(), **arguments)
    assert str(caught.value).startswith(expected)


# Round trip: draft, answer, ingest, retrieve ---------------------------------------------------


def _answer_xlsx(data: bytes, answers: dict[str, str]) -> bytes:
    """Fill the Answer cells of a drafted workbook as a vendor would, by criterion."""
    book = openpyxl.load_workbook(io.BytesIO(data))
    sheet = book["Answers"]
    header = [cell.value for cell in sheet[1]]
    criterion, answer = header.index("Criterion") + 1, header.index("Answer") + 1
    for row in range(2, sheet.max_row + 1):
        sheet.cell(row=row, column=answer, value=answers[sheet.cell(row, criterion).value])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _answer_csv(data: bytes, answers: dict[str, str]) -> bytes:
    records = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    criterion, answer = records[0].index("Criterion"), records[0].index("Answer")
    for record in records[1:]:
        record[answer] = answers[record[criterion]]
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator="\r\n").writerows(records)
    return buffer.getvalue().encode("utf-8-sig")


ANSWERS = {AES_CRITERION: "Yes: AES-256 with keys in AWS KMS, rotated yearly.",
           MFA_CRITERION: "Hardware security keys (FIDO2) for every administrator.",
           LOG_CRITERION: "Security logs are kept for 400 days."}


@pytest.mark.parametrize(("fmt", "fill"), [("xlsx", _answer_xlsx), ("csv", _answer_csv)])
def test_answered_draft_ingests_and_links_to_its_criteria(answered, fmt, fill):
    rows = plan_draft(answered, "acme", CRITERIA)
    draft = write_draft(rows, vendor_id="acme", round_number=2, fmt=fmt)
    round_ = spreadsheet_round(f"round_2.{fmt}", fill(draft, ANSWERS), vendor_id="acme",
                               round_number=2, timestamp="2024-04-01T12:00:00Z",
                               limits=PayloadLimits.from_settings(answered.settings))
    assert round_.rows == [2, 3, 4]
    assert "Column ID is not part of a questionnaire round and was ignored." in round_.notes
    assert answered.ingest_questionnaire(round_.payload).indexed_count == 3

    aes = answered.retrieve("acme", AES_CRITERION, "precedence")
    (new,) = [f for f in aes.followups if f.round_number == 2]
    assert (new.answer_text, new.tier, new.hash_match) == (ANSWERS[AES_CRITERION], "high", True)

    mfa = answered.retrieve("acme", MFA_CRITERION, "precedence")
    (edited,) = mfa.followups
    assert edited.question_text == MFA_QUESTION and edited.hash_match
    assert edited.tier in {"high", "medium"}
    assert edited.tier == ("high" if edited.question_similarity >= 0.7 else "medium")

    assert plan_draft(answered, "acme", CRITERIA)[1].answered_rounds == [2]
    with pytest.raises(UserInputError):
        plan_draft(answered, "acme", CRITERIA, only_unanswered=True)


def test_unanswered_draft_is_refused_and_the_store_is_unchanged(answered):
    draft = write_draft(plan_draft(answered, "acme", CRITERIA), vendor_id="acme",
                        round_number=2, fmt="xlsx")
    partly = _answer_xlsx(draft, {**ANSWERS, LOG_CRITERION: None})
    before = store_snapshot(answered)
    with pytest.raises(UserInputError) as caught:
        answered.ingest_questionnaire(spreadsheet_round(
            "round_2.xlsx", partly, vendor_id="acme", round_number=2, timestamp=None,
            limits=PayloadLimits()).payload)
    assert str(caught.value) == (
        "round_2.xlsx, sheet Answers, row 4, column Answer: the answer is blank.")
    assert_unchanged(before, store_snapshot(answered))


def test_answered_json_draft_ingests(answered):
    rows = plan_draft(answered, "acme", CRITERIA, only_unanswered=True)
    payload = json.loads(write_draft(rows, vendor_id="acme", round_number=2, fmt="json"))
    for response in payload["responses"]:
        response["answer_text"] = ANSWERS[response["criterion_question_text"]]
    parsed = parse_payload_bytes("round_2.json", json.dumps(payload).encode())
    assert answered.ingest_questionnaire(parsed).indexed_count == 2
    assert [h.round_number for h in answered.linked_followups("acme", LOG_CRITERION)] == [2]


def test_text_that_looks_like_a_formula_survives_the_workbook():
    odd = "=SUM(A1) is not a criterion anyone should write, but it stays text"
    rows = [DraftRow(criterion=odd, criterion_hash=criterion_hash(odd), question="+1 or -1?")]
    draft = write_draft(rows, vendor_id="acme", round_number=2, fmt="xlsx")
    round_ = spreadsheet_round("round_2.xlsx", _answer_xlsx(draft, {odd: "@ noted"}),
                               vendor_id="acme", round_number=2, timestamp=None,
                               limits=PayloadLimits())
    assert round_.preview() == [
        {"row": 2, "criterion": odd, "question": "+1 or -1?", "answer": "@ noted"}]


def test_a_draft_reads_back_as_a_criteria_list_with_its_ids_and_edited_questions(
        answered, tmp_path):
    path = tmp_path / "next_round.xlsx"
    path.write_bytes(write_draft(plan_draft(answered, "acme", CRITERIA), vendor_id="acme",
                                 round_number=2, fmt="xlsx"))
    assert load_criteria_file(path, max_chars=2000) == CRITERIA


def test_control_character_a_workbook_cannot_hold_is_refused_in_one_sentence():
    odd = "Does the vendor\x0bencrypt backups?"
    rows = [DraftRow(criterion=odd, criterion_hash=criterion_hash(odd), question=odd)]
    with pytest.raises(UserInputError) as caught:
        write_draft(rows, vendor_id="acme", round_number=2, fmt="xlsx")
    assert str(caught.value) == (
        "The criterion of row 2 holds the control character \\x0b, which a workbook cannot "
        "hold; draft it as .csv or .json, or remove the character.")
    text = write_draft(rows, vendor_id="acme", round_number=2, fmt="csv").decode("utf-8-sig")
    assert odd in text
