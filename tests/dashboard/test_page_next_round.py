"""The "Next round" page: the criteria with the rounds that answered them, Ask and Question
chosen in a table, and draft files that, once the vendor answers them, ingest as the next
round linked to the same criteria."""

from __future__ import annotations

import csv
import io
import json

import openpyxl
import pytest
import streamlit as st

from tests.conftest import AES_CRITERION, SAMPLE_CRITERIA
from tests.dashboard.conftest import page
from tests.support.sentences import one_sentence

EDITOR = "next_round_editor"
SOC2 = "Does the vendor have a current SOC 2 Type II report?"
MFA = "Does the vendor enforce multi-factor authentication for all administrative access?"
REWORDED = "Which cipher and key length protect the archive database's stored data?"


def editor(at):
    [table] = at.data_editor
    return table.value


def edit(at, changes: dict[int, dict]) -> None:
    """What a reviewer's edits in the table leave in the session (applied at the next run)."""
    at.session_state[EDITOR] = {"edited_rows": changes, "added_rows": [], "deleted_rows": []}


@pytest.fixture
def downloads(monkeypatch) -> dict[str, tuple[str, object, bool]]:
    """Every download button drawn: label -> (file name, data, disabled)."""
    offered: dict[str, tuple[str, object, bool]] = {}
    real = st.download_button

    def recording(label, data, file_name=None, *args, **kwargs):
        offered[label] = (file_name, data, kwargs.get("disabled", False))
        return real(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    return offered


def test_every_criterion_of_the_vendor_with_the_rounds_that_answered_it(dashboard_workbench):
    at = page("next_round").run()

    assert not at.exception and not at.error
    assert at.title[0].value == "Next round"
    table = editor(at).set_index("Criterion")
    assert list(table.columns) == ["Ask", "ID", "Linked answers", "Question"]
    # The vendor's criteria: the sample's list used with it, then the two its rounds answer
    # besides (the SOC 2 Type I wording, the MFA criterion with a typo).
    assert list(table.index[:12]) == SAMPLE_CRITERIA and len(table) == 14
    assert table.loc[AES_CRITERION, "Linked answers"] == "rounds 1, 2, 3, 4, 5"
    assert table.loc["Does the vendor review user access rights at least quarterly?",
                     "Linked answers"] == "round 3"
    assert table.loc[SOC2, "Linked answers"] == "none"
    assert (table["Question"] == table.index).all()  # the question defaults to the criterion
    assert table["Ask"].all()
    assert at.number_input(key="next_round_number").value == 6  # acme's rounds: 1 to 5
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "14 of 14 criteria asked in round 6 (11 of them already answered)." in shown
    assert "Evidence library" in shown
    assert "evidence ingest questionnaire acme_round_6.xlsx --vendor acme --round 6" in shown


def test_only_criteria_without_a_linked_answer_are_preselected(dashboard_workbench):
    at = page("next_round").run()
    at.toggle(key="next_round_only_unanswered").set_value(True).run()

    table = editor(at).set_index("Criterion")
    assert set(table.index[table["Ask"]]) == set(table.index[table["Linked answers"] == "none"])
    assert table.loc[SOC2, "Ask"] and not table.loc[AES_CRITERION, "Ask"]
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "3 of 14 criteria asked in round 6." in shown


def test_the_round_follows_the_vendor(dashboard_workbench):
    at = page("next_round").run()
    assert at.number_input(key="next_round_number").value == 6
    at.session_state["vendor"] = "northwind"
    at.run()
    assert at.number_input(key="next_round_number").value == 5  # northwind's rounds: 1 to 4
    assert editor(at).set_index("Criterion").loc[AES_CRITERION, "Linked answers"] == (
        "rounds 1, 2, 3")


def test_a_round_that_already_holds_answers_is_flagged(dashboard_workbench):
    at = page("next_round").run()
    at.number_input(key="next_round_number").set_value(5).run()
    assert [w.value.replace("\\", "") for w in at.warning] == [
        "Round 5 of acme already holds answers; the filled file's answers will join them."]


def fill_answers(name: str, data: bytes, answers: dict[str, str]) -> bytes:
    """The vendor's side: an answer typed into each row of the draft, by its criterion."""
    if name.endswith(".xlsx"):
        workbook = openpyxl.load_workbook(io.BytesIO(data))
        sheet = workbook["Answers"]
        header = [cell.value for cell in sheet[1]]
        for row in sheet.iter_rows(min_row=2):
            criterion = row[header.index("Criterion")].value
            row[header.index("Answer")].value = answers[criterion]
        buffer = io.BytesIO()
        workbook.save(buffer)
        return buffer.getvalue()
    if name.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
        answer = rows[0].index("Answer")
        for row in rows[1:]:
            row[answer] = answers[row[rows[0].index("Criterion")]]
        buffer = io.StringIO(newline="")
        csv.writer(buffer, lineterminator="\r\n").writerows(rows)
        return buffer.getvalue().encode("utf-8-sig")
    payload = json.loads(data)
    for response in payload["responses"]:
        response["answer_text"] = answers[response["criterion_question_text"]]
    return json.dumps(payload).encode()


@pytest.mark.parametrize("label, name", [("Excel workbook (.xlsx)", "acme_round_6.xlsx"),
                                         ("CSV (.csv)", "acme_round_6.csv"),
                                         ("JSON payload (.json)", "acme_round_6.json")])
def test_a_downloaded_draft_answered_ingests_as_the_next_round(dashboard_workbench, downloads,
                                                               label, name):
    at = page("next_round").run()
    criteria = editor(at)["Criterion"].tolist()
    asked = {criteria.index(AES_CRITERION): {"Question": REWORDED}, criteria.index(SOC2): {}}
    edit(at, {i: {"Ask": i in asked, **asked.get(i, {})} for i in range(len(criteria))})
    at.run()

    assert not at.exception and not at.error
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "2 of 14 criteria asked in round 6 (1 of them already answered)." in shown
    file_name, data, disabled = downloads[label]
    assert (file_name, disabled) == (name, False)

    # The vendor answers it; the reviewer ingests it on the Evidence library page.
    answered = fill_answers(name, data, {AES_CRITERION: "AES-256-GCM for the archive too.",
                                         SOC2: "Yes, issued in March."})
    library = page("library").run()
    library.file_uploader(key="upload_questionnaires").upload(name, answered,
                                                              "application/octet-stream")
    library.run()
    if name.endswith(".json"):
        library.button(key="ingest_questionnaires").click().run()
    else:
        assert library.number_input(key="sheet_round").value == 6
        library.button(key="ingest_spreadsheet_rounds").click().run()

    assert not library.exception and not library.error
    assert library.success[0].value == "acme round 6: 2 responses stored."
    # The edited question went to the vendor; the answer links to the unchanged criterion.
    [hit] = [h for h in dashboard_workbench.linked_followups("acme", AES_CRITERION)
             if h.round_number == 6]
    assert (hit.question_text, hit.answer_text) == (REWORDED, "AES-256-GCM for the archive too.")
    [hit] = dashboard_workbench.linked_followups("acme", SOC2)
    assert (hit.round_number, hit.question_text) == (6, SOC2)

    # Drafting again, both now show round 6 as a linked answer.
    again = page("next_round").run()
    table = editor(again).set_index("Criterion")
    assert table.loc[AES_CRITERION, "Linked answers"] == "rounds 1, 2, 3, 4, 5, 6"
    assert table.loc[SOC2, "Linked answers"] == "round 6"
    assert again.number_input(key="next_round_number").value == 7


def test_nothing_asked_disables_the_downloads(dashboard_workbench, downloads):
    at = page("next_round").run()
    edit(at, {i: {"Ask": False} for i in range(len(editor(at)))})
    at.run()

    assert not at.exception and not at.error
    assert [d[2] for d in downloads.values()] == [True, True, True]
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "0 of 14 criteria asked in round 6." in shown


def test_a_blank_question_asks_the_criterion_and_an_overlong_one_is_refused(
        dashboard_workbench, downloads):
    at = page("next_round").run()
    edit(at, {0: {"Question": "   "}})
    at.run()
    data = json.loads(downloads["JSON payload (.json)"][1])
    assert data["responses"][0]["question_text"] == AES_CRITERION

    edit(at, {0: {"Question": "x" * 5000}})
    at.run()
    assert not at.exception
    [error] = at.error
    assert error.value.startswith("Row 1 of the table: the question is 5000 characters long")
    assert one_sentence(error.value), error.value
    assert [d[2] for d in downloads.values()] == [True, True, True]


def test_an_uploaded_criteria_file_with_ids_and_questions(dashboard_workbench, downloads):
    at = page("next_round").run()
    at.radio(key="next_round_criteria_source").set_value("file").run()
    assert any(i.value == "Upload a criteria file to use it." for i in at.info)
    sheet = ("ID,Criterion,Question\r\n"
             f"ENC-1,{AES_CRITERION},Which cipher protects stored data?\r\n"
             f"MFA-1,{MFA},\r\n").encode()
    at.file_uploader(key="next_round_criteria_file").upload("criteria.csv", sheet, "text/csv")
    at.run()

    assert not at.exception and not at.error
    table = editor(at)
    assert table.to_dict("records") == [
        {"Ask": True, "ID": "ENC-1", "Criterion": AES_CRITERION,
         "Linked answers": "rounds 1, 2, 3, 4, 5",
         "Question": "Which cipher protects stored data?"},
        {"Ask": True, "ID": "MFA-1", "Criterion": MFA, "Linked answers": "none",
         "Question": MFA}]
    data = downloads["CSV (.csv)"][1].decode("utf-8-sig").splitlines()
    assert data[0] == "ID,Criterion,Question,Answer"
    assert data[1] == f"ENC-1,{AES_CRITERION},Which cipher protects stored data?,"


def test_a_refused_criteria_file_is_one_sentence(dashboard_workbench):
    at = page("next_round").run()
    at.radio(key="next_round_criteria_source").set_value("file").run()
    at.file_uploader(key="next_round_criteria_file").upload(
        "criteria.csv", b"ID,Question\r\nA-1,Anything?\r\n", "text/csv")
    at.run()

    assert not at.exception
    [error] = at.error
    assert error.value.startswith("criteria.csv, row 1: there is no criterion column")
    assert one_sentence(error.value), error.value
    assert not at.data_editor


def test_no_vendor_says_so(dashboard_workbench):
    at = page("next_round", vendor="").run()
    assert not at.exception
    assert [i.value for i in at.info] == ["Pick a vendor in the sidebar."]
