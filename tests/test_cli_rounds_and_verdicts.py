"""The new commands of CONTRACT.md as a reviewer runs them: spreadsheet rounds, criteria
spreadsheets, `questionnaire draft`, `assess` (through the real `openai` client against a
local stub server) and `report` (in process, with the fake embedder behind the command)."""

from __future__ import annotations

import csv
import json

import pytest
from openpyxl import load_workbook

from core.cli import main
from core.hashing import criterion_hash
from core.workbench import Workbench
from tests.conftest import SAMPLE_DATA
from tests.fakes import point_the_command_at
from tests.support.cli import error_message
from tests.support.cli import run_json as run
from tests.support.snapshot import store_snapshot

pytest_plugins = ["tests.llm_stub"]

MFA = "Does the vendor enforce multi-factor authentication for all administrative access?"
PEN_TEST = "Does the vendor perform annual penetration testing?"
VERDICT_KEYS = {"vendor_id", "criterion", "criterion_hash", "strategy", "verdict", "reasoning",
                "contradictions", "cited_rounds", "model", "prompt_sha256"}


@pytest.fixture
def cli(workbench: Workbench, monkeypatch):
    """The sample vendors' documents and JSON rounds in a store the command opens."""
    for vendor in ("acme", "northwind"):
        folder = SAMPLE_DATA / "vendors" / vendor
        workbench.ingest_documents(vendor, sorted((folder / "documents").glob("*.md")))
        list(workbench.ingest_questionnaires(workbench.load_questionnaires(
            sorted((folder / "questionnaires").glob("round_*.json")))))
    point_the_command_at(workbench, monkeypatch)
    return workbench


def test_the_sample_spreadsheet_round_ingests_and_links_a_pasted_criterion(cli, capsys):
    sheet = SAMPLE_DATA / "vendors" / "northwind" / "questionnaires" / "round_4.xlsx"
    code, [line], err = run(capsys, "ingest", "questionnaire", str(sheet), "--vendor",
                            "northwind", "--round", "4", "--timestamp", "2024-02-05T09:15:00Z")
    assert (code, err) == (0, "")
    assert line == {"indexed_count": 4, "round_number": 4, "vendor_id": "northwind"}

    code, [trace], _ = run(capsys, "retrieve", "--vendor", "northwind", "--criterion", MFA)
    linked = {f["round_number"]: f for f in trace["followups"]}
    assert sorted(linked) == [2, 4]  # round 4's criterion carries a non-breaking hyphen
    assert linked[4]["hash_match"] is True
    assert "non-breaking hyphen" in linked[4]["tier_reason"]
    assert trace["criterion_hash"] == criterion_hash(MFA)

    # the same file again changes nothing (CONTRACT.md's idempotency)
    before = cli.status("northwind")[0].followup_responses
    run(capsys, "ingest", "questionnaire", str(sheet), "--vendor", "northwind", "--round", "4",
        "--timestamp", "2024-02-05T09:15:00Z")
    assert cli.status("northwind")[0].followup_responses == before


def test_a_spreadsheet_refusal_names_sheet_row_and_column_and_writes_nothing(
        cli, capsys, tmp_path):
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Answers"
    sheet.append(["Criterion", "Question", "Answer"])
    for i in range(12):
        sheet.append([PEN_TEST, f"Question {i}?", "" if i == 11 else "Yes."])
    book.save(tmp_path / "round_2.xlsx")
    before = store_snapshot(cli)

    code, lines, err = run(capsys, "ingest", "questionnaire", str(tmp_path / "round_2.xlsx"),
                           "--vendor", "acme", "--round", "6")
    assert (code, lines) == (2, [])
    assert error_message(err) == (f"{tmp_path / 'round_2.xlsx'}, sheet Answers, row 13, column "
                              "Answer: the answer is blank.")
    assert store_snapshot(cli) == before


def test_spreadsheet_options_are_required_for_a_spreadsheet_and_refused_for_json(cli, capsys,
                                                                                   tmp_path):
    sheet = SAMPLE_DATA / "vendors" / "northwind" / "questionnaires" / "round_4.xlsx"
    code, _, err = run(capsys, "ingest", "questionnaire", str(sheet), "--vendor", "northwind")
    assert code == 2 and "give --vendor and --round" in error_message(err)
    payload = SAMPLE_DATA / "vendors" / "acme" / "questionnaires" / "round_2.json"
    code, _, err = run(capsys, "ingest", "questionnaire", str(payload), "--round", "3")
    assert code == 2 and error_message(err).startswith("--round applies only to .csv and .xlsx")


def test_criteria_spreadsheet_ids_are_echoed_in_every_json_line(cli, capsys, tmp_path):
    criteria = tmp_path / "criteria.csv"
    criteria.write_text(f"id,criterion\nC6,{PEN_TEST}\nC3,\"{MFA}\"\n", encoding="utf-8")
    code, traces, _ = run(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                          str(criteria))
    assert code == 0
    assert [(t["criterion_id"], t["criterion"]) for t in traces] == [("C6", PEN_TEST),
                                                                      ("C3", MFA)]


def test_draft_fill_and_ingest_closes_the_loop(cli, capsys, tmp_path):
    criteria = tmp_path / "criteria.csv"
    with criteria.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "criterion", "question"])
        writer.writerow(["C3", MFA, "Which administrator accounts can sign in without MFA?"])
        writer.writerow(["C6", PEN_TEST, ""])
        writer.writerow(["C11", "Does the vendor require security awareness training for all "
                                "employees at least annually?", ""])
    draft = tmp_path / "acme_round_6.xlsx"
    code, [line], err = run(capsys, "questionnaire", "draft", "--vendor", "acme",
                            "--criteria-file", str(criteria), "--round", "6",
                            "--only-unanswered", "--output", str(draft))
    assert code == 0, err
    # C6 has linked answers in acme's rounds 1 and 4; C3 (only a typo'd link) and C11 do not
    assert line["questions"] == 2 and line["already_answered"] == 0
    book = load_workbook(draft)
    rows = list(book["Answers"].iter_rows(values_only=True))
    assert rows[0] == ("ID", "Criterion", "Question", "Answer")
    assert [r[:3] for r in rows[1:]] == [
        ("C3", MFA, "Which administrator accounts can sign in without MFA?"),
        ("C11", "Does the vendor require security awareness training for all employees at "
                "least annually?",
         "Does the vendor require security awareness training for all employees at least "
         "annually?")]

    for row in book["Answers"].iter_rows(min_row=2):
        row[3].value = "None: every administrator account requires a FIDO2 key."
    book.save(tmp_path / "filled.xlsx")
    code, [stored], err = run(capsys, "ingest", "questionnaire", str(tmp_path / "filled.xlsx"),
                              "--vendor", "acme", "--round", "6")
    assert code == 0 and stored["indexed_count"] == 2
    code, [trace], _ = run(capsys, "retrieve", "--vendor", "acme", "--criterion", MFA)
    newest = [f for f in trace["followups"] if f["round_number"] == 6]
    assert newest and newest[0]["hash_match"] is True  # the edited question kept its link
    assert newest[0]["question_text"] == "Which administrator accounts can sign in without MFA?"


def test_draft_refusals_write_no_file(cli, capsys, tmp_path):
    out = tmp_path / "draft.docx"
    code, _, err = run(capsys, "questionnaire", "draft", "--vendor", "acme", "--criterion",
                       PEN_TEST, "--round", "6", "--output", str(out))
    assert code == 2 and ".docx" in error_message(err) and not out.exists()
    code, _, err = run(capsys, "questionnaire", "draft", "--vendor", "nobody", "--criterion",
                       PEN_TEST, "--round", "1", "--output", str(tmp_path / "d.xlsx"))
    assert code == 2 and "nobody" in error_message(err) and not (tmp_path / "d.xlsx").exists()
    code, _, err = run(capsys, "questionnaire", "draft", "--vendor", "acme", "--criterion",
                       PEN_TEST, "--round", "0", "--output", str(tmp_path / "d.xlsx"))
    assert code == 2 and "--round" in error_message(err)


def test_assess_without_an_endpoint_says_which_setting_to_set(cli, capsys):
    before = store_snapshot(cli)
    code, lines, err = run(capsys, "assess", "--vendor", "acme", "--criterion", PEN_TEST)
    assert (code, lines) == (2, [])
    assert "EVIDENCE_LLM_BASE_URL" in error_message(err) and "EVIDENCE_LLM_MODEL" in err
    assert store_snapshot(cli) == before


def test_assess_sends_the_printed_prompt_and_records_the_verdict_once(
        cli, capsys, llm_stub, monkeypatch):
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    main(["retrieve", "--vendor", "acme", "--criterion", PEN_TEST, "--format", "prompt"])
    printed = capsys.readouterr().out
    llm_stub.enqueue({"verdict": "MET", "reasoning": "Round 4 confirms annual tests.",
                      "contradictions": [], "cited_rounds": [4]})

    code, [verdict], err = run(capsys, "assess", "--vendor", "acme", "--criterion", PEN_TEST)
    assert code == 0, err
    assert set(verdict) >= VERDICT_KEYS
    assert (verdict["verdict"], verdict["cited_rounds"], verdict["cached"]) == ("MET", [4], False)
    [request] = llm_stub.requests
    assert request.messages == [{"role": "user", "content": printed.removesuffix("\n")}]
    assert request.response_format["type"] == "json_schema"

    code, [again], _ = run(capsys, "assess", "--vendor", "acme", "--criterion", PEN_TEST)
    assert code == 0 and again["cached"] is True and len(llm_stub.requests) == 1
    assert again["prompt_sha256"] == verdict["prompt_sha256"]


def test_assess_refuses_an_answer_outside_the_schema_in_one_sentence(
        cli, capsys, llm_stub, monkeypatch):
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    llm_stub.enqueue({"verdict": "PROBABLY", "reasoning": "x", "contradictions": [],
                      "cited_rounds": []})
    code, lines, err = run(capsys, "assess", "--vendor", "acme", "--criterion", PEN_TEST)
    assert (code, lines) == (1, [])
    assert "does not match the schema" in error_message(err)
    assert cli.verdicts.latest("acme", PEN_TEST).verdict is None


def test_report_writes_the_evidence_pack_in_each_format(cli, capsys, tmp_path):
    for name in ("pack.md", "pack.html", "pack.jsonl"):
        code, [line], err = run(capsys, "report", "--vendor", "acme", "--criteria-file",
                                str(SAMPLE_DATA / "criteria.txt"), "--output",
                                str(tmp_path / name))
        assert code == 0, err
        assert line["criteria"] == 12 and line["verdicts"] == 0
    html = (tmp_path / "pack.html").read_text(encoding="utf-8")
    assert "No verdict: no language model has assessed this criterion" in html
    records = [json.loads(x) for x in (tmp_path / "pack.jsonl").read_text().splitlines()]
    assert len(records) == 13
    code, _, err = run(capsys, "report", "--vendor", "acme", "--criterion", PEN_TEST,
                       "--output", str(tmp_path / "missing" / "pack.md"))
    assert code == 2 and "does not exist" in error_message(err)
