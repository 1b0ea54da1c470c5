"""A table of a layout nobody described: its layout guessed (header row anywhere, an id column,
a question, an answer with short status columns joined before it), every sheet with it read
and labelled by sheet, the guess shown and corrected per file, and `--dry-run` writing
nothing (in process, the fake embedder behind the command).

The control-responsibility workbook is built from the layout facts of a published NIST
800-53 Rev 5 customer responsibility matrix: two title rows and a legend row above the header
(row 5); columns Control Family, Control ID, Control Name, a column per party marked "X",
Responsibility Type, Applicability, Applicability Rationale and Implementation Notes; ids such
as `AC-2(1)`; one sheet per deployment answering the same ids, the hosted one with one more
party column (so its columns sit one letter further right); a summary sheet first."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest

from core.workbench import Workbench
from tests.fakes import point_the_command_at
from tests.support.cli import error_message, run_json
from tests.support.questionnaires import saved
from tests.support.snapshot import store_snapshot

ON_PREMISES = [
    ("AC-2", "Account Management", "Customer", "Customer manages the accounts of the installed "
                                               "product in its own directory."),
    ("AC-2(1)", "Automated Account Management", "Shared", "Directory synchronisation is "
                                                           "supported."),
    ("SC-28", "Protection of Information at Rest", "Customer",
     "Customer manages encryption of data at rest."),
    ("SC-13", "Cryptographic Protection", "Customer", ""),
]
HOSTED = [
    ("AC-2", "Account Management", "Provider", "Accounts are provisioned through the "
                                               "provider's identity service."),
    ("AC-2(1)", "Automated Account Management", "Provider", "Provisioned by SCIM."),
    ("SC-28", "Protection of Information at Rest", "Provider",
     "All customer data at rest is encrypted with AES-256 in the hosted service."),
    ("SC-13", "Cryptographic Protection", "Inherited", "FIPS 140-3 validated modules."),
]
FAMILIES = {"AC": "AC - Access Control", "SC": "SC - System and Communications Protection"}


def control_workbook(sheets: dict[str, list[tuple[str, str, str, str]]]) -> bytes:
    workbook = openpyxl.Workbook()
    summary = workbook.active
    summary.title = "Summary"
    summary["A1"] = "Responsibility summary"
    summary.append([])
    summary.append(["Responsibility", "Count"])
    for party in ("Customer", "Shared", "Provider"):
        summary.append([party, 1])
    for title, rows in sheets.items():
        hosted = title.startswith("Hosted")
        parties = ["Vendor", "Customer", *(["Cloud provider"] if hosted else [])]
        sheet = workbook.create_sheet(title)
        sheet["A1"] = f"Customer responsibility matrix: {title}"
        sheet["A2"] = "Framework: NIST SP 800-53 Rev 5"
        sheet.append(["LEGEND:", None, *parties, "Not Applicable"])
        sheet.append([])
        sheet.append(["Control Family", "Control ID", "Control Name", *parties,
                      "Responsibility Type", "Applicability\n(Vendor Scope)",
                      "Applicability Rationale", "Implementation Notes"])
        for identifier, name, responsibility, notes in rows:
            marks = ["X" if responsibility in ("Provider", "Shared") else None,
                     "X" if responsibility in ("Customer", "Shared") else None,
                     *(["X"] if hosted else [])]
            sheet.append([FAMILIES[identifier[:2]], identifier, name, *marks, responsibility,
                          "In Scope", None, notes or None])
    return saved(workbook)


WORKBOOK = "Control Implementation.xlsx"


@pytest.fixture
def cli(workbench: Workbench, monkeypatch) -> Workbench:
    point_the_command_at(workbench, monkeypatch)
    return workbench


@pytest.fixture
def package(tmp_path) -> Path:
    folder = tmp_path / "package"
    folder.mkdir()
    (folder / WORKBOOK).write_bytes(control_workbook({"On-Premises": ON_PREMISES,
                                                      "Hosted Service": HOSTED}))
    (folder / "Security Overview.md").write_text(
        "# Security overview\n\nThe hosted service runs in two regions.\n")
    return folder


def lines_by_file(lines: list[dict]) -> dict[str, dict]:
    return {line["file"]: line for line in lines}


def test_a_layout_nobody_described_is_guessed_and_every_sheet_is_read(cli, capsys, package):
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    line = lines_by_file(lines)[WORKBOOK]
    assert (line["became"], line["layout"]) == ("round",
                                                "guessed: id=B,question=C,answer=F+G+I")
    assert line["indexed_count"] == 8  # four controls on each offering's sheet
    assert line["sheets"]["read"] == ["On-Premises", "Hosted Service"]
    assert [s["sheet"] for s in line["sheets"]["left_out"]] == ["Summary"]
    assert "Guessed the layout of Control Implementation.xlsx: id=B (Control ID), "\
           "question=C (Control Name), answer=F+G+I (Responsibility Type, Applicability "\
           "(Vendor Scope), Implementation Notes), below the header in row 5" in err
    assert "left out Summary" in err
    # The hosted answer is the one a reviewer of the hosted service reads, told apart from
    # the on-premises one by its label.
    hits = cli.linked_followups("acme", "Protection of Information at Rest")
    answers = {hit.source: hit.answer_text for hit in hits}
    assert answers == {
        "Control Implementation.xlsx › Hosted Service › SC-28":
            "Provider. In Scope. All customer data at rest is encrypted with AES-256 in the "
            "hosted service.",
        "Control Implementation.xlsx › On-Premises › SC-28":
            "Customer. In Scope. Customer manages encryption of data at rest.",
    }


def test_a_dry_run_shows_what_each_file_would_become_and_writes_nothing(cli, capsys, package):
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", "--dry-run",
                                package)
    assert code == 0, err
    assert "a dry run; nothing was written" in err
    assert store_snapshot(cli) == before
    files = lines_by_file(lines)
    table = files[WORKBOOK]
    assert table["answers"] == 8 and "indexed_count" not in table
    assert [(p["sheet"], p["id"], p["answer"]) for p in table["preview"]] == [
        ("On-Premises", "AC-2", "Customer. In Scope. Customer manages the accounts of the "
                                "installed product in its own directory."),
        ("On-Premises", "AC-2(1)", "Shared. In Scope. Directory synchronisation is supported."),
        ("On-Premises", "SC-28", "Customer. In Scope. Customer manages encryption of data at "
                                 "rest."),
    ]
    document = files["Security Overview.md"]
    assert document["became"] == "document" and document["chunks"] == 1
    assert "two regions" in document["preview"][0]["text"]


def test_one_files_mapping_and_sheet_are_corrected_from_the_package_command(cli, capsys,
                                                                            package):
    code, lines, err = run_json(
        capsys, "ingest", "package", "--vendor", "acme", "--dry-run",
        "--columns", f"{WORKBOOK}=id=Control ID,question=Control Name,answer=Implementation Notes",
        "--sheet", f"{WORKBOOK}=Hosted Service", package)
    assert code == 0, err
    line = lines_by_file(lines)[WORKBOOK]
    assert line["layout"] == ("a table mapped by --columns id=Control ID,question=Control "
                              "Name,answer=Implementation Notes")
    assert line["sheets"]["read"] == ["Hosted Service"]
    assert {s["sheet"]: s["why"] for s in line["sheets"]["left_out"]} == {
        "Summary": "not chosen with --sheet", "On-Premises": "not chosen with --sheet"}
    assert line["answers"] == 4
    assert line["preview"][2]["answer"] == ("All customer data at rest is encrypted with "
                                            "AES-256 in the hosted service.")


@pytest.mark.parametrize(("option", "value", "needle"), [
    ("--columns", "id=A,question=B,answer=C+D", "--columns names id, which is not a file"),
    ("--columns", "nothing", "--columns 'nothing' does not name a file"),
    ("--sheet", f"{WORKBOOK}=Cloud", "has no sheet named 'Cloud' (its sheets: Summary, "
                                     "On-Premises, Hosted Service)"),
    ("--sheet", "Security Overview.md=Sheet1", "Security Overview.md is not a .csv or .xlsx "
                                               "table; --sheet applies only to one"),
])
def test_a_wrong_per_file_option_is_one_sentence_and_writes_nothing(cli, capsys, package,
                                                                   option, value, needle):
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", option, value,
                                package)
    assert (code, lines) == (2, [])
    assert needle in error_message(err)
    assert store_snapshot(cli) == before


def test_a_table_whose_layout_cannot_be_guessed_says_which_columns_to_map(cli, capsys,
                                                                         tmp_path):
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Controls"
    sheet.append(["Ref", "Area", "Owner"])
    for ref, area in (("AC-1", "Access"), ("AC-2", "Accounts"), ("AU-2", "Audit")):
        sheet.append([ref, area, "IT"])
    path = tmp_path / "controls.xlsx"
    path.write_bytes(saved(workbook))
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "questionnaire", "--vendor", "acme",
                                "--round", "1", path)
    assert (code, lines) == (2, [])
    message = error_message(err)
    assert "map the columns with --columns" in message
    assert "its layout could not be guessed (sheet Controls: no column right of the question"\
           in message
    assert store_snapshot(cli) == before


def test_questionnaire_dry_run_prints_the_line_and_writes_nothing(cli, capsys, tmp_path):
    path = tmp_path / WORKBOOK
    path.write_bytes(control_workbook({"Hosted Service": HOSTED}))
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "questionnaire", "--vendor", "acme",
                                "--round", "2", "--dry-run", path)
    assert code == 0, err
    assert store_snapshot(cli) == before
    [line] = lines
    assert line["became"] == "round" and line["round_number"] == 2 and line["answers"] == 4
    assert line["layout"] == "guessed: id=B,question=C,answer=G+H+J"
    assert [p["id"] for p in line["preview"]] == ["AC-2", "AC-2(1)", "SC-28"]
    assert json.dumps(line["sheets"]) == json.dumps(
        {"read": ["Hosted Service"], "left_out": [{"sheet": "Summary", "why": (
            "no row in the first 40 holds the headers Control ID, Control Name, "
            "Responsibility Type and 2 more of the guessed layout")}]})


# Questionnaires in PDFs ------------------------------------------------------------------------

def test_a_questionnaire_in_a_pdf_becomes_a_round_labelled_by_page(cli, capsys, tmp_path):
    from tests.test_pdf_questionnaires import caiq_rows, page_of, ruled_caiq

    rows = caiq_rows(26)
    data = ruled_caiq(rows)
    folder = tmp_path / "package"
    folder.mkdir()
    (folder / "Vendor CAIQ.pdf").write_bytes(data)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", folder)
    assert code == 0, err
    [line] = lines
    assert (line["became"], line["layout"], line["indexed_count"]) == (
        "round", "CAIQ v4.0.3 (PDF)", 26)
    assert line["reason"].startswith("a questionnaire (CAIQ v4.0.3 (PDF)): 26 answers from "
                                     "pages 1 to ")
    last = rows[-1]
    [hit] = cli.linked_followups("acme", last.question)
    assert hit.source == (f"Vendor CAIQ.pdf › page {page_of(data, last.identifier)} › "
                          f"{last.identifier}")
    assert hit.answer_text.startswith(f"{last.answer}. Reviewed by the service owner")


def test_a_pdf_that_looks_like_a_questionnaire_is_kept_as_a_document_and_says_so(
        cli, capsys, tmp_path):
    from tests.test_pdf_questionnaires import Row, caiq_rows, ruled_caiq

    blank = ruled_caiq([Row(r.identifier, r.question, "", "", "") for r in caiq_rows(8)])
    folder = tmp_path / "package"
    folder.mkdir()
    (folder / "CAIQ to fill in.pdf").write_bytes(blank)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", folder)
    assert code == 0, err
    [line] = lines
    assert line["became"] == "document"
    assert line["reason"].endswith(
        "It looks like a questionnaire and was kept as a document: 8 question ids stand in a "
        "column, but no answer to them can be read from the table.")


def test_a_pdf_given_as_a_round_is_read_or_refused_in_one_sentence(cli, capsys, tmp_path):
    from tests.test_pdf_questionnaires import caiq_rows, policy_pdf, ruled_caiq

    caiq = tmp_path / "Vendor CAIQ.pdf"
    caiq.write_bytes(ruled_caiq(caiq_rows(6)))
    code, lines, err = run_json(capsys, "ingest", "questionnaire", "--vendor", "acme",
                                "--round", "3", caiq)
    assert code == 0, err
    assert lines == [{"indexed_count": 6, "round_number": 3, "vendor_id": "acme"}]
    policy = tmp_path / "policy.pdf"
    policy.write_bytes(policy_pdf(False))
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "questionnaire", "--vendor", "acme",
                                "--round", "4", policy)
    assert (code, lines) == (2, [])
    assert error_message(err).startswith(f"{policy} holds no questionnaire's table (")
    assert "ingest it as a document with `evidence ingest docs`" in err
    assert store_snapshot(cli) == before
