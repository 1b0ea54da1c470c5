"""Standard questionnaires as vendors send them (CAIQ v4 and v3, HECVAT 3 Full and Lite,
HECVAT 4, CoSN K-12CVAT, a SIG export, an ISO 27001 statement of applicability) and tables of
any other layout read by `--columns`: each ingests unchanged as one round, every answer with
its question id, sheet and row, named by file, sheet and id wherever it is shown.

The workbooks are built by tests/support/questionnaires.py with the real layouts' sheet
names, title rows, header texts, merged cells and formulas with stored values."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from core.errors import UserInputError
from core.workbench import Workbench
from tests import test_spreadsheets as sheets
from tests.support.questionnaires import (
    Item,
    MappedControl,
    caiq_v3,
    caiq_v4,
    hecvat_3,
    hecvat_4,
    saved,
    sig_export,
    soa_2013_2022,
    statement_of_applicability,
)
from tests.support.snapshot import assert_unchanged, store_snapshot

ANNUAL = "Are the policies and procedures reviewed and updated at least annually?"


def read(name: str, data: bytes, **options: Any):
    """The spreadsheet tests' reader (vendor acme, their timestamp and limits), as round 1."""
    return sheets.read(name, data, **{"round_number": 1, **options})


def refusal(name: str, data: bytes, **options: Any) -> str:
    """The spreadsheet tests' one-sentence refusal, of round 1."""
    return sheets.refusal(name, data, **{"round_number": 1, **options})


def answers(round_) -> list[tuple[str | None, str, str]]:
    return [(r.questionnaire_id, r.question_text, r.answer_text)
            for r in round_.payload.responses]


def caiq_items(count: int) -> list[Item]:
    """`count` CAIQ questions over controls of three questions each, all answered."""
    items = []
    for n in range(count):
        control, question = divmod(n, 3)
        items.append(Item(f"CEK-{control + 1:02d}.{question + 1}",
                          f"Is key management control {control + 1} part {question + 1} in "
                          "place?", "Yes" if n % 7 else "No",
                          f"Implemented as described in the key policy, section {n}."))
    return items


# Each layout read ------------------------------------------------------------------------------


def test_a_caiq_v4_reads_every_answer_with_its_id_explanation_and_ccm_columns():
    data = caiq_v4([Item("CEK-12.1", "Are cryptographic keys rotated based on a cryptoperiod?",
                         "Yes", "Keys are rotated at least annually."),
                    Item("CEK-12.2", "Is key rotation automated?", "NA"),
                    Item("UEM-14.1", "Is endpoint data encrypted?")],  # left unanswered
                   owners={"CEK-12.2": "3rd-party outsourced"})
    read_ = read("Vendor CAIQ.xlsx", data)
    assert answers(read_) == [
        ("CEK-12.1", "Are cryptographic keys rotated based on a cryptoperiod?",
         "Yes. Keys are rotated at least annually."),
        ("CEK-12.2", "Is key rotation automated?", "NA")]
    first, second = read_.payload.responses
    assert first.criterion_question_text == first.question_text  # linked to its question
    assert (first.origin.file, first.origin.sheet, first.origin.row, first.origin.layout) == (
        "Vendor CAIQ.xlsx", "CAIQv4.0.3", 3, "CAIQ v4.0.3")
    # The CCM columns are merged down the control's questions: both rows read their value.
    assert first.origin.extras["ccm_control_id"] == second.origin.extras["ccm_control_id"] == (
        "CEK-12")
    assert first.origin.extras["control_ownership"] == "CSP-owned"
    assert second.origin.extras["control_ownership"] == "3rd-party outsourced"
    assert read_.layout == "CAIQ v4.0.3"
    assert any("UEM-14.1" in note and "no answer" in note for note in read_.notes)


def test_a_caiq_v3_reads_the_answer_marked_under_yes_no_or_not_applicable():
    data = caiq_v3([Item("AIS-01.1", "Do you use industry standards to build in security?",
                         "Yes", "OWASP ASVS level 2."),
                    Item("AIS-01.2", "Do you use an automated source code analysis tool?", "No"),
                    Item("TVM-02.1", "Do you conduct network-layer vulnerability scans?",
                         "Not Applicable")])
    read_ = read("caiq-v3.xlsx", data)
    assert read_.layout == "CAIQ v3.0.1"
    assert answers(read_) == [
        ("AIS-01.1", "Do you use industry standards to build in security?",
         "Yes. OWASP ASVS level 2."),
        ("AIS-01.2", "Do you use an automated source code analysis tool?", "No"),
        ("TVM-02.1", "Do you conduct network-layer vulnerability scans?", "Not Applicable")]
    assert [r.origin.row for r in read_.payload.responses] == [5, 6, 7]
    assert read_.payload.responses[1].origin.extras["control_id"] == "AIS-01"


def test_a_caiq_v3_filled_with_typed_words_reads_the_word_not_the_column():
    """Vendors type YES / NO / NOT into the answer columns instead of an x, sometimes into
    the wrong column, and sometimes a note: the word is the answer, a note is a note."""
    workbook = openpyxl.load_workbook(io.BytesIO(caiq_v3([
        Item("AIS-01.1", "Do you use industry standards to build in security?", "Yes"),
        Item("AIS-01.2", "Do you use an automated source code analysis tool?", "Yes"),
        Item("TVM-02.1", "Do you conduct network-layer vulnerability scans?",
             "Not Applicable")])))
    sheet = workbook.active
    sheet["F5"] = "YES"
    sheet["F6"] = "NO"  # typed into the Yes column
    sheet["H7"] = "NOt"
    sheet["G7"] = "Scans are run by the hosting provider"
    read_ = read("caiq-v3.xlsx", saved(workbook))
    assert answers(read_) == [
        ("AIS-01.1", "Do you use industry standards to build in security?", "Yes"),
        ("AIS-01.2", "Do you use an automated source code analysis tool?", "No"),
        ("TVM-02.1", "Do you conduct network-layer vulnerability scans?",
         "Not Applicable. Scans are run by the hosting provider")]


@pytest.mark.parametrize(("kind", "version", "name"), [
    ("Full", "3.04", "HECVAT Full 3.04"),
    ("Full", "3.03", "HECVAT Full 3.03"),
    ("Lite", "3.04", "HECVAT Lite 3.04"),
])
def test_a_hecvat_3_reads_questions_through_their_stored_formula_values(kind, version, name):
    data = hecvat_3({
        "Documentation": [Item("DOCU-01", "Have you undergone a SSAE 18/SOC 2 audit?", "Yes",
                               "SOC 2 Type II, period ending 2024-06-30.")],
        "Incident Handling": [Item("HFIH-01", "Do you have a formal incident response plan?",
                                   "Yes"),
                              Item("HFIH-02", "Do you carry cyber-liability insurance?")],
    }, kind=kind, version=version)
    read_ = read("Vendor HECVAT.xlsx", data)
    assert read_.layout == name
    # The vendor's contact rows (GNRL), the date, the section titles and instructions are no
    # answers; the question cells are VLOOKUPs read through the values stored with them.
    assert answers(read_) == [
        ("DOCU-01", "Have you undergone a SSAE 18/SOC 2 audit?",
         "Yes. SOC 2 Type II, period ending 2024-06-30."),
        ("HFIH-01", "Do you have a formal incident response plan?", "Yes")]
    assert read_.payload.responses[0].origin.sheet == f"HECVAT - {kind} | Vendor Response"


def test_a_hecvat_4_reads_the_answers_of_every_part():
    data = hecvat_4({
        "Organization": {"Documentation": [Item("DOCU-01", "Have you undergone a SSAE 18/SOC 2 "
                                                "audit?*", "Yes", "SOC 2 Type II.")]},
        "Product": {"Data": [Item("DATA-01", "Is data encrypted at rest?", "Yes", "AES-256."),
                             Item("DATA-02", "Is data encrypted in transit?", "Yes")]},
    })
    read_ = read("HECVAT414.xlsx", data)
    assert read_.layout == "HECVAT 4.1.4"
    assert [(r.questionnaire_id, r.origin.sheet) for r in read_.payload.responses] == [
        ("DOCU-01", "Organization"), ("DATA-01", "Product"), ("DATA-02", "Product")]


def test_a_sig_export_and_a_statement_of_applicability_are_read_by_their_headers():
    sig = read("SIG Core.xlsx", sig_export([
        ("A. Enterprise Risk Management", Item("A.1.1", "Is there a risk management program?",
                                               "Yes", "Reviewed yearly by the board.")),
        ("Business Information", Item("1.1.1", "Legal name of the company?", "Example Ltd"))]))
    assert answers(sig) == [
        ("A.1.1", "Is there a risk management program?", "Yes. Reviewed yearly by the board."),
        ("1.1.1", "Legal name of the company?", "Example Ltd")]
    assert sig.payload.responses[0].origin.extras["section"] == "A. Enterprise Risk Management"

    soa = read("SoA.xlsx", statement_of_applicability([
        Item("A.8.24", "Use of cryptography", "Yes", "Customer data is encrypted."),
        Item("A.7.5", "Protecting against physical threats", "No", "Hosted by AWS.")]))
    assert soa.layout == "ISO 27001 statement of applicability"
    assert answers(soa) == [
        ("A.8.24", "Use of cryptography",
         "Applicable: Yes. Customer data is encrypted. Implemented by the CISO's programme."),
        ("A.7.5", "Protecting against physical threats", "Applicable: No. Hosted by AWS.")]


def test_a_statement_of_applicability_mapping_2013_to_2022_is_read_by_its_2022_ids():
    data = soa_2013_2022([
        MappedControl("5.1.1", "5.1", "Policies for information security",
                      "Policies for information security are defined and approved.", "Y",
                      "Business requirement"),
        MappedControl("5.1.2 ", "5.1", "Policies for information security",
                      "Policies are reviewed at planned intervals.", "Y", "Business requirement"),
        MappedControl("8.1.3", "5.10", "Acceptable use of information",
                      "Rules for acceptable use are documented.", "Y", "Legal requirement"),
        MappedControl("NEW", "5.7", "Threat intelligence",
                      "Information about threats is collected and analysed.", "Y",
                      "Adopted industry practice"),
        MappedControl("11.1.4", "7.5", "Protecting against physical threats",
                      "Protection against natural disasters is designed.", "N",
                      "Data centres are operated by the hosting provider.",
                      third_party="Hosting provider"),
    ], withdrawn=["16.1.3"])
    soa = read("Vendor SOA.xlsx", data)
    assert soa.layout == "ISO 27001 statement of applicability"
    assert answers(soa) == [
        ("5.1", "Policies for information security are defined and approved.",
         "Applicable: Yes. Business requirement"),
        ("5.1", "Policies are reviewed at planned intervals.",
         "Applicable: Yes. Business requirement"),
        ("5.10", "Rules for acceptable use are documented.",
         "Applicable: Yes. Legal requirement"),
        ("5.7", "Information about threats is collected and analysed.",
         "Applicable: Yes. Adopted industry practice"),
        ("7.5", "Protection against natural disasters is designed.",
         "Applicable: No. Data centres are operated by the hosting provider. Controlled by a "
         "third party: Hosting provider."),
    ]
    extras = [r.origin.extras for r in soa.payload.responses]
    assert [e["iso_2013"] for e in extras] == ["5.1.1", "5.1.2", "8.1.3", "NEW", "11.1.4"]
    assert extras[2]["control_title"] == "5.10: Acceptable use of information"
    assert [r.origin.sheet for r in soa.payload.responses] == ["SOA"] * 5


def test_a_workbook_of_any_size_is_one_round():
    read_ = read("Vendor CAIQ.xlsx", caiq_v4(caiq_items(261)))
    assert len(read_.payload.responses) == 261
    assert read_.payload.round_number == 1


# Refusals -------------------------------------------------------------------------------------


def test_a_formula_without_a_stored_value_is_refused_naming_its_cell():
    workbook = openpyxl.load_workbook(io.BytesIO(hecvat_3({"Data": [
        Item("DATA-01", "Is data encrypted at rest?", "Yes")]})))
    sheet = workbook["HECVAT - Full | Vendor Response"]
    data = saved(workbook)  # saved again by openpyxl: no formula keeps a stored value
    row = next(r for r in range(1, sheet.max_row + 1) if sheet.cell(r, 1).value == "DATA-01")
    assert refusal("Vendor HECVAT.xlsx", data) == (
        f"Vendor HECVAT.xlsx, sheet HECVAT - Full | Vendor Response, cell B{row}: the formula "
        f"=VLOOKUP(A{row},Questions!$B$3:$C$256,2,FALSE) has no stored value (the workbook was "
        "saved by a program that does not calculate); open it in Excel or LibreOffice and "
        "save it again.")


def test_a_question_id_answered_twice_differently_is_refused():
    data = caiq_v4([Item("CEK-12.1", "Are keys rotated?", "Yes"),
                    Item("CEK-12.1", "Are keys rotated?", "No")])
    assert refusal("Vendor CAIQ.xlsx", data) == (
        "Vendor CAIQ.xlsx, sheet CAIQv4.0.3, row 4: question CEK-12.1 is answered again, "
        "differently from row 3 of sheet CAIQv4.0.3; keep one of the two answers.")


def test_a_question_id_repeated_word_for_word_is_read_once():
    data = caiq_v4([Item("CEK-12.1", "Are keys rotated?", "Yes"),
                    Item("CEK-12.1", "Are keys rotated?", "Yes")])
    read_ = read("Vendor CAIQ.xlsx", data)
    assert answers(read_) == [("CEK-12.1", "Are keys rotated?", "Yes")]
    assert any("repeats question CEK-12.1" in note for note in read_.notes)


def test_a_standard_workbook_with_no_answer_is_refused():
    assert refusal("Vendor CAIQ.xlsx", caiq_v4([Item("CEK-12.1", "Are keys rotated?")])) == (
        "Vendor CAIQ.xlsx is a CAIQ v4.0.3 workbook with no answered question (sheet(s) "
        "CAIQv4.0.3); fill in the vendor's answers first.")


# Any other table, by --columns ------------------------------------------------------------


def table_csv(rows: list[list[str]]) -> bytes:
    return "\r\n".join(",".join(row) for row in rows).encode("utf-8")


TABLE = [["Vendor security answers"], [], ["Ref", "Question asked", "Response", "Comment"],
         ["Q-1", "Do you encrypt data at rest?", "Yes", "AES-256 in KMS."],
         ["Q-2", "Do you rotate keys?", "Yes", ""], ["Q-3", "Unanswered?", "", ""]]


@pytest.mark.parametrize("columns", ["id=A,question=B,answer=C+D",
                                     "id=Ref,question=Question asked,answer=Response+Comment"])
def test_columns_read_any_table_by_letters_or_header_names(columns):
    from core.ingest.rounds.mapping import ColumnMapping

    read_ = read("answers.csv", table_csv(TABLE), columns=ColumnMapping.parse(columns))
    assert answers(read_) == [("Q-1", "Do you encrypt data at rest?", "Yes. AES-256 in KMS."),
                              ("Q-2", "Do you rotate keys?", "Yes")]
    assert [r.origin.row for r in read_.payload.responses] == [4, 5]


@pytest.mark.parametrize(("columns", "sentence"), [
    ("id=Ref,question=Nope,answer=Response",
     "answers.csv, no row in the first 40 holds the headers Ref, Nope, Response that "
     "--columns names."),
    ("question=B", "--columns has no answer column; give at least question=... and answer=...."),
    ("id=A,question=B,answer=C,colour=D",
     "--columns: 'colour' is not a field; the fields are id, criterion, question, answer."),
    ("id", "--columns: 'id' is not FIELD=COLUMN; write for example --columns "
           "id=A,question=B,answer=C+E."),
])
def test_a_wrong_column_mapping_is_one_sentence(columns, sentence):
    from core.ingest.rounds.mapping import ColumnMapping

    with pytest.raises(UserInputError) as caught:
        read("answers.csv", table_csv(TABLE), columns=ColumnMapping.parse(columns))
    assert str(caught.value) == sentence


# Through the store: labels, links, precedence --------------------------------------------


def ingest(workbench: Workbench, folder: Path, name: str, data: bytes, round_number: int,
           **options: Any) -> list[Any]:
    path = folder / name
    path.write_bytes(data)
    loaded = workbench.load_rounds([path], vendor_id="acme", round_number=round_number,
                                   timestamp=f"2024-0{round_number}-01T09:00:00Z", **options)
    return list(workbench.ingest_questionnaires([r.payload for r in loaded]))


def test_a_caiq_is_one_round_named_by_file_sheet_and_id(workbench, tmp_path):
    [report] = ingest(workbench, tmp_path, "Vendor CAIQ.xlsx", caiq_v4(caiq_items(261)), 1)
    assert (report.indexed_count, report.round_number) == (261, 1)
    [status] = workbench.status("acme")
    assert (status.followup_responses, status.rounds) == (261, [1])
    criterion = "Is key management control 5 part 2 in place?"
    trace = workbench.retrieve("acme", criterion, strategy="precedence")
    [hit] = trace.followups
    assert hit.source == "Vendor CAIQ.xlsx › CAIQv4.0.3 › CEK-05.2"
    assert hit.questionnaire_id == "CEK-05.2" and hit.tier == "high"
    assert "<source>Vendor CAIQ.xlsx › CAIQv4.0.3 › CEK-05.2</source>" in trace.context
    assert "Vendor CAIQ.xlsx › CAIQv4.0.3 › CEK-05.2" in trace.prompt


def test_one_question_under_three_ids_is_three_answers_and_the_context_names_each(workbench,
                                                                                 tmp_path):
    ingest(workbench, tmp_path, "Vendor CAIQ.xlsx", caiq_v4([
        Item("BCR-01.2", ANNUAL, "Yes"), Item("CCC-01.2", ANNUAL, "Yes", "By the change board."),
        Item("GRC-01.2", ANNUAL, "No", "Every two years.")]), 1)
    trace = workbench.retrieve("acme", ANNUAL, strategy="precedence")
    assert sorted(h.questionnaire_id for h in trace.followups) == ["BCR-01.2", "CCC-01.2",
                                                                   "GRC-01.2"]
    assert all(h.tier == "high" for h in trace.followups)
    assert ("<source>Vendor CAIQ.xlsx › CAIQv4.0.3 › BCR-01.2, CCC-01.2, GRC-01.2</source>"
            in trace.context)
    assert "[Round 1 › GRC-01.2 (" in trace.context


def test_a_later_round_answering_the_same_id_takes_precedence(workbench, tmp_path):
    ingest(workbench, tmp_path, "CAIQ 2024.xlsx", caiq_v4([
        Item("CEK-12.1", "Are keys rotated?", "Yes", "Every two years.")]), 1)
    ingest(workbench, tmp_path, "CAIQ 2025.xlsx", caiq_v4([
        Item("CEK-12.1", "Are keys rotated?", "Yes", "Every year.")]), 2)
    trace = workbench.retrieve("acme", "Are keys rotated?", strategy="precedence")
    assert [(h.round_number, h.source) for h in trace.followups] == [
        (1, "CAIQ 2024.xlsx › CAIQv4.0.3 › CEK-12.1"),
        (2, "CAIQ 2025.xlsx › CAIQv4.0.3 › CEK-12.1")]
    prompt = trace.prompt
    assert prompt.index("CURRENT ANSWER - ROUND 2") < prompt.index("ROUND 1 -")
    assert ("[CURRENT ANSWER - ROUND 2 - 2024-02-01 - CAIQ 2025.xlsx › CAIQv4.0.3 › CEK-12.1]"
            in prompt)
    assert ("[EARLIER ANSWER - ROUND 1 - 2024-01-01 - CAIQ 2024.xlsx › CAIQv4.0.3 › CEK-12.1 - "
            "round 2 (2024-02-01) answered this criterion later]" in prompt)


def test_a_refused_workbook_writes_nothing(workbench, tmp_path):
    ingest(workbench, tmp_path, "CAIQ 2024.xlsx", caiq_v4(caiq_items(6)), 1)
    before = store_snapshot(workbench)
    bad = caiq_v4([Item("CEK-12.1", "Are keys rotated?", "Yes"),
                   Item("CEK-12.1", "Are keys rotated?", "No")])
    with pytest.raises(UserInputError):
        ingest(workbench, tmp_path, "CAIQ 2025.xlsx", bad, 2)
    assert_unchanged(before, store_snapshot(workbench))


def test_the_stored_answer_keeps_its_layout_columns(workbench, tmp_path):
    ingest(workbench, tmp_path, "Vendor CAIQ.xlsx", caiq_v4([
        Item("CEK-12.1", "Are keys rotated?", "Yes", "Yearly.")]), 1)
    vendor = workbench.store.open_vendor("acme")
    [record] = [r for r in vendor.records() if r.metadata.get("questionnaire_id")]
    assert record.metadata["origin_file"] == "Vendor CAIQ.xlsx"
    assert record.metadata["origin_sheet"] == "CAIQv4.0.3"
    assert record.metadata["origin_row"] == 3
    assert json.loads(str(record.metadata["origin_extras"]))["ccm_control_id"] == "CEK-12"


# Criteria mapped to questionnaire ids -------------------------------------------------------


def test_a_criteria_file_names_the_questionnaire_ids_answering_each_criterion(tmp_path):
    from core.ingest.criteria_lists import load_criteria_file

    path = tmp_path / "criteria.csv"
    path.write_text("id,criterion,questionnaire_ids\n"
                    "C1,Keys are rotated at least yearly,CEK-12.1; CEK-12.2\n"
                    "C2,Backups are tested,\n", encoding="utf-8")
    first, second = load_criteria_file(path, max_chars=2000)
    assert (first.id, first.questionnaire_ids) == ("C1", ("CEK-12.1", "CEK-12.2"))
    assert second.questionnaire_ids == ()


@pytest.mark.parametrize("strategy", ["precedence", "tiered", "hash_extraction", "hybrid"])
def test_answers_to_mapped_ids_link_to_a_criterion_in_the_reviewers_words(workbench, tmp_path,
                                                                          strategy):
    ingest(workbench, tmp_path, "Vendor CAIQ.xlsx", caiq_v4([
        Item("CEK-12.1", "Are cryptographic keys rotated based on a cryptoperiod?", "Yes",
             "Keys are rotated at least annually."),
        Item("DSP-17.1", "Is sensitive data protected in transit?", "Yes", "TLS 1.2+.")]), 1)
    criterion = "The vendor rotates its encryption keys every year"
    unmapped = workbench.retrieve("acme", criterion, strategy)
    assert not any(h.tier == "high" for h in unmapped.followups)
    trace = workbench.retrieve("acme", criterion, strategy, ["CEK-12.1"])
    [hit] = [h for h in trace.followups if h.questionnaire_id == "CEK-12.1"]
    assert (hit.tier, hit.linked_by_id) == ("high", True)
    assert hit.tier_reason == "linked by questionnaire id CEK-12.1: high"
    assert trace.questionnaire_ids == ["CEK-12.1"]
    assert "Vendor CAIQ.xlsx › CAIQv4.0.3 › CEK-12.1" in trace.context


# Google VSAQ ---------------------------------------------------------------------------------

VSAQ_DEFINITION = """// A comment line, as VSAQ ships its questionnaires
{
  "questionnaire": [
    {"type": "block", "text": "Web Application Security Questionnaire", "items": [
      {"type": "line", "id": "application_name", "text": "Application name"},
      {"type": "radiogroup", "id": "security_contact", "text": "Do you have a " +
         "security contact?", "defaultChoice": false,
       "choices": [{"security_contact_yes": "Yes"}, {"security_contact_no": "No"}]},
      {"type": "checkgroup", "id": "tls_versions", "text": "Which TLS versions are enabled?",
       "choices": [{"tls_12": "TLS 1.2"}, {"tls_13": "TLS 1.3"}, {"tls_10": "TLS 1.0"}]},
      {"type": "box", "id": "encryption_at_rest", "text": "How is data encrypted at rest?"}
    ]}
  ]
}
"""
VSAQ_ANSWERS = {"application_name": "Example Portal", "security_contact_yes": "checked",
                "security_contact_no": "", "tls_12": "checked", "tls_13": "checked",
                "tls_10": "", "encryption_at_rest": "AES-256, keys in KMS rotated yearly."}


def test_a_vsaq_answers_file_is_read_with_the_questionnaire_beside_it(workbench, tmp_path):
    (tmp_path / "webapp.json").write_text(VSAQ_DEFINITION, encoding="utf-8")
    (tmp_path / "answers_webapp").write_text(json.dumps(VSAQ_ANSWERS), encoding="utf-8")
    [loaded] = workbench.load_rounds([tmp_path / "answers_webapp"], vendor_id="acme",
                                     round_number=1)
    assert [(r.questionnaire_id, r.question_text, r.answer_text)
            for r in loaded.payload.responses] == [
        ("application_name", "Application name", "Example Portal"),
        ("security_contact", "Do you have a security contact?", "Yes"),
        ("tls_versions", "Which TLS versions are enabled?", "TLS 1.2; TLS 1.3"),
        ("encryption_at_rest", "How is data encrypted at rest?",
         "AES-256, keys in KMS rotated yearly.")]
    [report] = workbench.ingest_questionnaires([loaded.payload])
    assert report.indexed_count == 4
    trace = workbench.retrieve("acme", "Which TLS versions are enabled?", "precedence")
    assert [h.source for h in trace.followups] == ["answers_webapp › tls_versions"]


def test_a_vsaq_answers_file_without_its_questionnaire_is_refused(workbench, tmp_path):
    (tmp_path / "answers_webapp").write_text(json.dumps(VSAQ_ANSWERS), encoding="utf-8")
    with pytest.raises(UserInputError) as caught:
        workbench.load_rounds([tmp_path / "answers_webapp"], vendor_id="acme", round_number=1)
    assert str(caught.value).endswith(
        "answers_webapp is a VSAQ answers file, which holds no question text; put the VSAQ "
        "questionnaire it answers (webapp.json) beside it.")
