"""`evidence ingest package`: a vendor's whole package as it arrives, in one command, and
`ingest docs --skip-unreadable` (in process, the fake embedder behind the command)."""

from __future__ import annotations

import json
import shutil

import pytest

from core.workbench import Workbench
from tests.fakes import point_the_command_at
from tests.support.cli import error_message, run_json
from tests.support.packages import (
    ACCESS_REVIEW,
    KEY_ROTATION,
    locked,
    package_files,
    pdf_bytes,
    write_package,
)
from tests.support.snapshot import store_snapshot

OCR = shutil.which("tesseract") is not None
needs_ocr = pytest.mark.skipif(not OCR, reason="the OCR engine (tesseract) is installed by "
                                               "make ocr-packages")


@pytest.fixture
def cli(workbench: Workbench, monkeypatch) -> Workbench:
    point_the_command_at(workbench, monkeypatch)
    return workbench


@pytest.fixture
def package(tmp_path):
    return write_package(tmp_path / "package", package_files(scanned=OCR))


def by_file(lines: list[dict]) -> dict[str, dict]:
    return {line["file"]: line for line in lines}


def test_a_package_becomes_documents_and_one_round_per_questionnaire(cli, capsys, package):
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    files = by_file(lines)
    assert list(files) == [".DS_Store", "Example CAIQ.xlsx", "HECVAT Full.xlsx",
                           "ISO 27001 Certificate.md", "Statement of Applicability.xlsx",
                           "policies/Access Control Policy.pdf",
                           *(["policies/registry listing.pdf"] if OCR else [])]
    expected = {
        ".DS_Store": ("skipped", None, None),
        "Example CAIQ.xlsx": ("round", "CAIQ v4.0.3", 1),
        "HECVAT Full.xlsx": ("round", "HECVAT Full 3.04", 2),
        "ISO 27001 Certificate.md": ("document", "certificate", None),
        "Statement of Applicability.xlsx": ("round", "ISO 27001 statement of applicability",
                                            3),
        "policies/Access Control Policy.pdf": ("document", "policy", None),
    }
    if OCR:  # a registration that states its number and "Valid until": it expires as a
        # certificate does, and is read as one
        expected["policies/registry listing.pdf"] = ("document", "certificate", None)
    assert {f: (line["became"], line["layout"], line["round_number"])
            for f, line in files.items()} == expected
    assert files["Example CAIQ.xlsx"]["indexed_count"] == 2
    assert files["policies/Access Control Policy.pdf"]["chunks"] >= 1
    assert "a policy document (PDF, 1 page)" in files["policies/Access Control Policy.pdf"][
        "reason"]
    assert "hidden file" in files[".DS_Store"]["reason"]
    [status] = cli.status("acme")
    assert status.rounds == [1, 2, 3] and status.documents == len(expected) - 4

    trace = cli.retrieve("acme", "How often does the vendor rotate its encryption keys?",
                         "precedence")
    assert any(KEY_ROTATION in e.text for e in trace.evidence), trace.context
    assert "Example CAIQ.xlsx › CAIQv4.0.3 › CEK-12.1" in trace.context
    trace = cli.retrieve("acme", "How often is access to production reviewed?", "semantic")
    assert any(ACCESS_REVIEW in e.text for e in trace.evidence)


@needs_ocr
def test_the_text_of_a_screenshot_pdf_answers_a_question(cli, capsys, package):
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    assert "1 read by OCR" in by_file(lines)["policies/registry listing.pdf"]["reason"]
    trace = cli.retrieve("acme", "What is the vendor's data processor registration number?",
                         "semantic")
    [excerpt] = [e for e in trace.evidence if e.source == "policies/registry listing.pdf"]
    assert "0842-7731-19" in excerpt.text and excerpt.ocr


def test_the_same_package_again_changes_nothing(cli, capsys, package):
    assert run_json(capsys, "ingest", "package", "--vendor", "acme", package)[0] == 0
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    files = by_file(lines)
    assert files["Example CAIQ.xlsx"]["round_number"] == 1
    assert "already holds this file's answers" in files["Example CAIQ.xlsx"]["reason"]
    assert {line["status"] for line in lines if line["became"] == "document"} == {"unchanged"}
    assert store_snapshot(cli) == before
    assert cli.status("acme")[0].rounds == [1, 2, 3]


def test_a_changed_workbook_replaces_its_round_and_a_new_one_takes_the_next(cli, capsys,
                                                                          package):
    from tests.support.packages import CAIQ_ITEMS
    from tests.support.questionnaires import Item, caiq_v4

    assert run_json(capsys, "ingest", "package", "--vendor", "acme", package)[0] == 0
    (package / "Example CAIQ.xlsx").write_bytes(caiq_v4(CAIQ_ITEMS[:1]))
    (package / "Later CAIQ.xlsx").write_bytes(caiq_v4([Item("IAM-14.1", "Is MFA required?",
                                                             "No", "Passwords only.")]))
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    files = by_file(lines)
    assert (files["Example CAIQ.xlsx"]["round_number"],
            files["Example CAIQ.xlsx"]["removed_count"]) == (1, 1)
    assert files["Later CAIQ.xlsx"]["round_number"] == 4
    assert cli.status("acme")[0].followup_responses == 1 + 1 + 1 + 1


def test_round_numbers_start_where_the_reviewer_says(cli, capsys, package):
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", "--round", 5,
                                package)
    assert code == 0, err
    assert [line["round_number"] for line in lines if line["became"] == "round"] == [5, 6, 7]


def test_a_round_holding_other_answers_is_not_taken_over(cli, capsys, package, tmp_path):
    payload = {"vendor_id": "acme", "round_number": 6, "timestamp": "2024-01-15T10:30:00Z",
               "responses": [{"criterion_question_text": None, "question_text": "Q?",
                              "answer_text": "A."}]}
    (tmp_path / "round_6.json").write_text(json.dumps(payload))
    assert run_json(capsys, "ingest", "questionnaire", tmp_path / "round_6.json")[0] == 0
    before = store_snapshot(cli)
    code, _, err = run_json(capsys, "ingest", "package", "--vendor", "acme", "--round", 5,
                            package)
    assert code == 2
    assert error_message(err) == (
        "HECVAT Full.xlsx would be round 6 of acme, which already holds answers from another "
        "file; give another --round or leave it out for the next free round.")
    assert store_snapshot(cli) == before
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    assert [line["round_number"] for line in lines if line["became"] == "round"] == [7, 8, 9]


def bad_package(package):
    (package / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (package / "policies" / "pentest.pdf").write_bytes(
        locked(pdf_bytes("Findings."), user="open-sesame", owner="owner"))
    return package


def test_unreadable_files_refuse_the_package_naming_each_and_nothing_is_written(
        cli, capsys, package):
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme",
                                bad_package(package))
    assert (code, lines) == (2, [])
    message = error_message(err)
    assert message.startswith(f"The package {package} was not ingested, as 2 files cannot "
                              "be read: logo.png is not a format the workbench reads")
    assert "policies/pentest.pdf is encrypted with a password needed to open it" in message
    assert message.endswith("fix them, or ingest the rest with --skip-unreadable.")
    assert str(package) + "/" not in message.replace(f"The package {package} ", "")
    assert store_snapshot(cli) == before and cli.vendor_ids() == []


def test_skip_unreadable_ingests_the_rest_and_lists_what_it_skipped(cli, capsys, package):
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme",
                                "--skip-unreadable", bad_package(package))
    assert code == 0, err
    files = by_file(lines)
    assert files["logo.png"]["became"] == files["policies/pentest.pdf"]["became"] == "skipped"
    assert "password needed to open it" in files["policies/pentest.pdf"]["reason"]
    assert files["Example CAIQ.xlsx"]["became"] == "round"
    assert cli.status("acme")[0].rounds == [1, 2, 3]


@pytest.mark.parametrize(("files", "sentence"), [
    ({}, "holds no file the workbench reads (documents: .md, .txt, .pdf, .docx, .html or "
         ".htm; questionnaires: .xlsx, .csv or .json, or a PDF or web page holding question "
         "ids); it is empty."),
    ({".DS_Store": b"x"}, "; every file was skipped."),
])
def test_a_package_with_nothing_usable_is_one_sentence(cli, capsys, tmp_path, files,
                                                       sentence):
    folder = write_package(tmp_path / "empty", files)
    folder.mkdir(exist_ok=True)
    code, _, err = run_json(capsys, "ingest", "package", "--vendor", "acme", folder)
    assert code == 2 and error_message(err).endswith(sentence)
    assert cli.vendor_ids() == []


def test_a_round_of_another_vendor_in_the_package_is_refused_by_name(cli, capsys, package):
    payload = {"vendor_id": "northwind", "round_number": 1,
               "timestamp": "2024-01-15T10:30:00Z",
               "responses": [{"criterion_question_text": None, "question_text": "Q?",
                              "answer_text": "A."}]}
    (package / "round.json").write_text(json.dumps(payload))
    code, _, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 2
    assert ("round.json is a round of the vendor 'northwind', not of 'acme'"
            in error_message(err))


def test_ingest_docs_skip_unreadable(cli, capsys, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("# Backups\n\nBackups are restored every month.\n")
    (folder / "locked.pdf").write_bytes(locked(pdf_bytes("x"), user="u", owner="o"))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    code, _, err = run_json(capsys, "ingest", "docs", "--vendor", "acme", folder)
    assert code == 2
    message = error_message(err)
    assert message.startswith("2 files cannot be read, so nothing was written: ")
    assert "broken.pdf" in message and "locked.pdf is encrypted" in message
    assert cli.vendor_ids() == []
    code, [line], err = run_json(capsys, "ingest", "docs", "--vendor", "acme",
                                 "--skip-unreadable", folder)
    assert code == 0, err
    assert [d["source"] for d in line["documents"]] == ["good.md"]
    assert [s["source"] for s in line["skipped"]] == ["broken.pdf", "locked.pdf"]
    assert err.count("evidence: note: skipped ") == 2


@pytest.mark.parametrize(("name", "first_text", "kind"), [
    ("Instructure Business Continuity & Disaster Recovery.pdf", "", "policy"),
    ("Information Security Policy.docx", "", "policy"),
    ("AWS SOC 3.pdf", "", "report"),
    ("Example ESG Report FY2023.pdf", "", "report"),
    ("AWS ISO 27001 Certificate.pdf", "", "certificate"),
    ("Global COI.pdf", "CERTIFICATE OF LIABILITY INSURANCE", "certificate"),
    ("Security Overview.pdf", "Our platform runs on AWS.", "other"),
])
def test_each_document_is_sorted_by_its_name_then_its_first_text(name, first_text, kind):
    from core.timeline.reading import read_facts

    assert read_facts([first_text], source=name).kind == kind
