"""Answers keyed by a control, and criteria mapped to controls (core/controls/): a responsibility
matrix's answers know their control, a criterion mapped to it (by a reviewer, or by the
confident proposals of the ranking over the catalog) reaches them by a metadata lookup in a
tier of its own, two sheets answering one control take one place, a later round answering the
control supersedes an earlier one, and `criteria map` proposes, keeps and accepts."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from core.config import Settings
from core.controls.mappings import parse_controls
from core.errors import UserInputError
from core.workbench import Workbench
from tests.fakes import FakeReranker, point_the_command_at
from tests.support.cli import error_message, run_json, run_main
from tests.support.control_matrix import CLOUD, ON_PREMISES, write_matrix

LOCKOUT = "Accounts are locked after a run of wrong passwords"


@pytest.fixture
def matrix_vendor(workbench, monkeypatch, tmp_path, capsys) -> Workbench:
    """Vendor `acme` with one round: a matrix of an on-premises and a cloud sheet."""
    point_the_command_at(workbench, monkeypatch)
    book = write_matrix(tmp_path / "crm.xlsx",
                        {"On-Premises CRM": ON_PREMISES, "Cloud CRM": CLOUD})
    code, _out, err = run_main(capsys, "ingest", "questionnaire",
                              "--vendor", "acme", "--round", "1", book)
    assert code == 0, err
    assert "FedRAMP customer responsibility matrix: 12 answers" in err
    return workbench


def criteria_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["criterion", "controls"])
        writer.writerows(rows)
    return path


def test_a_matrix_answer_knows_its_control_and_sheet(matrix_vendor, capsys):
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criterion",
                                "Is traffic to the service encrypted?", "--strategy",
                                "semantic")
    assert code == 0, err
    answers = [c for c in lines[0]["first_stage"] if c["metadata"].get("control_id")]
    by_id = {(c["metadata"]["questionnaire_id"], c["metadata"]["origin_sheet"]): c
             for c in answers}
    tls = by_id[("SC-8", "Cloud CRM")]["metadata"]
    assert tls["control_framework"] == "NIST SP 800-53 Rev. 5"
    assert tls["control_title"] == "Transmission Confidentiality and Integrity"
    # The matrix asks no question: the control's id and title are it.
    assert tls["question_text"] == "SC-8 Transmission Confidentiality and Integrity"
    assert tls["answer_text"].startswith("Can be inherited from the CSP: Yes. TLS 1.2")
    part = by_id[("AC-2(a)", "On-Premises CRM")]["metadata"]
    assert (part["control_id"], part["control_part"]) == ("AC-2", "a")


def test_answers_to_a_mapped_control_link_in_their_own_tier(matrix_vendor, capsys, tmp_path):
    criteria = criteria_csv(tmp_path / "criteria.csv", [(LOCKOUT, "AC-7")])
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                                criteria)
    assert code == 0, err
    trace = lines[0]
    assert [(c["id"], c["status"]) for c in trace["controls"]] == [("AC-7", "accepted")]
    linked = [h for h in trace["followups"] if h["tier"] == "control"]
    assert sorted(h["sheet"] for h in linked) == ["Cloud CRM", "On-Premises CRM"]
    for hit in linked:
        assert hit["control"] == {"framework": "NIST SP 800-53 Rev. 5", "id": "AC-7",
                                  "title": "Unsuccessful Logon Attempts"}
        assert hit["linked_by_control"]["status"] == "accepted"
        assert hit["tier_reason"].startswith(
            "linked by control AC-7 (Unsuccessful Logon Attempts), accepted; answered on "
            f"sheet {hit['sheet']}")
    # The answer leads the context, and the model reads how it is linked.
    assert trace["current_answer"]["linked_by_control"]["id"] == "AC-7"
    assert "linked by control AC-7 (Unsuccessful Logon Attempts), accepted" in trace["prompt"]
    assert "Five failures in fifteen minutes" in trace["context"]


def test_two_sheets_and_parts_of_one_control_take_one_place(matrix_vendor, capsys, tmp_path):
    # Three controls, eight answers (AC-2 has two parts on two sheets): the round cap of 3
    # counts controls, not rows, so every one is in the context.
    criteria = criteria_csv(tmp_path / "criteria.csv",
                            [("Who manages accounts, and how?", "AC-2;AC-7;CP-4")])
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                                criteria)
    assert code == 0, err
    trace = lines[0]
    assert len([h for h in trace["followups"] if h["tier"] == "control"]) == 8
    assert not trace["dropped_followups"]


def test_retrieve_text_names_the_control_beside_each_linked_answer(matrix_vendor, capsys,
                                                                   tmp_path):
    criteria = criteria_csv(tmp_path / "criteria.csv", [(LOCKOUT, "AC-7")])
    code, out, err = run_main(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                              criteria, "--format", "text")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "Controls: AC-7 (Unsuccessful Logon Attempts), accepted" in flat
    assert ("linked by control AC-7 (Unsuccessful Logon Attempts), accepted; sheet Cloud CRM"
            in flat)


def test_a_later_round_supersedes_the_earlier_answers_to_a_control(matrix_vendor, capsys,
                                                                   tmp_path):
    later = write_matrix(tmp_path / "crm-2.xlsx", {"Cloud CRM": {
        "AC-7": ("Yes", "Three failures now lock the sign-in until an administrator frees it.")}})
    code, _out, err = run_main(capsys, "ingest", "questionnaire", "--vendor", "acme",
                               "--round", "2", later)
    assert code == 0, err
    criteria = criteria_csv(tmp_path / "criteria.csv", [(LOCKOUT, "AC-7")])
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                                criteria)
    trace = lines[0]
    assert trace["current_answer"]["round_number"] == 2
    assert "Three failures" in trace["current_answer"]["answer_text"]
    dropped = [d for d in trace["dropped_followups"] if d["followup"]["tier"] == "control"]
    assert {d["followup"]["round_number"] for d in dropped} == {1}
    assert all("answered control AC-7 before round 2" in d["reason"] for d in dropped)


def test_criteria_map_proposes_keeps_and_links_for_every_vendor(matrix_vendor, capsys,
                                                                 tmp_path):
    criteria = tmp_path / "criteria.txt"
    criteria.write_text("Unsuccessful logon attempts lock the account\n", encoding="utf-8")
    code, lines, err = run_json(capsys, "criteria", "map", "--criteria-file", criteria)
    assert code == 0, err
    line = lines[0]
    assert set(line) >= {"criterion", "criterion_hash", "controls"}
    top = line["controls"][0]
    assert set(top) >= {"framework", "id", "title", "score", "status"}
    assert "AC-7" in [c["id"] for c in line["controls"][:3]]
    assert {c["status"] for c in line["controls"]} == {"proposed"}
    # Kept in the store: a retrieval of the criterion links by the confident proposals.
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criterion",
                                "Unsuccessful logon attempts lock the account")
    linked = [h for h in lines[0]["followups"] if h["tier"] == "control"]
    assert linked and all(h["linked_by_control"]["status"] == "proposed" for h in linked)
    assert "AC-7" in {h["control"]["id"] for h in linked}
    # Accepted: the kept list says so, and the audit log records who decided.
    code, lines, err = run_json(capsys, "criteria", "map", "--criteria-file", criteria,
                                "--accept")
    assert code == 0, err
    assert lines[0]["controls"][0]["status"] == "accepted"
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criterion",
                                "Unsuccessful logon attempts lock the account")
    linked = [h for h in lines[0]["followups"] if h["tier"] == "control"]
    assert linked and {h["linked_by_control"]["status"] for h in linked} == {"accepted"}
    actions = [e.action for e in matrix_vendor.store.audit_log().entries()]
    assert "map_controls" in actions


def test_a_controls_cell_is_accepted_and_none_is_a_decision(matrix_vendor, capsys, tmp_path):
    criteria = criteria_csv(tmp_path / "criteria.csv", [
        (LOCKOUT, "AC-7; ac-2.1"), ("Staff get background checks", "")])
    code, lines, err = run_json(capsys, "criteria", "map", "--criteria-file", criteria,
                                "--format", "json")
    assert code == 0, err
    assert [(c["id"], c["status"]) for c in lines[0]["controls"][:2]] == [
        ("AC-7", "accepted"), ("AC-2(1)", "accepted")]
    assert lines[1]["decided"] is True
    assert all(c["status"] == "proposed" for c in lines[1]["controls"])
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criterion",
                                "Staff get background checks")
    assert not [h for h in lines[0]["followups"] if h["tier"] == "control"]


def test_an_unknown_control_id_is_refused_in_one_sentence(matrix_vendor, capsys, tmp_path):
    criteria = criteria_csv(tmp_path / "criteria.csv", [(LOCKOUT, "AC-7;XY-99")])
    code, out, err = run_main(capsys, "criteria", "map", "--criteria-file", criteria)
    assert code == 2 and out == ""
    message = error_message(err)
    assert "'XY-99' is not a control id" in message and "row 2" in message
    assert matrix_vendor.store.criteria_controls() is None  # nothing kept
    code, out, err = run_main(capsys, "criteria", "map", "--criteria-file", criteria,
                              "--framework", "sig")
    assert code == 2 and "--framework 'sig'" in error_message(err)


def test_iso_2013_answers_link_through_nists_mapping(workbench, capsys, monkeypatch):
    point_the_command_at(workbench, monkeypatch)
    workbench.ingest_questionnaire({
        "vendor_id": "iso", "round_number": 1, "timestamp": "2026-01-05T10:00:00Z",
        "responses": [{"criterion_question_text": "Secure log-on procedures",
                       "question_text": "Secure log-on procedures", "questionnaire_id":
                       "A.9.4.2", "answer_text": "Logon is locked after five failures."}]})
    trace = workbench.retrieve("iso", LOCKOUT, controls=["AC-7"])
    [hit] = [h for h in trace.followups if h.tier == "control"]
    assert hit.control.framework == "ISO/IEC 27001:2013" and hit.control.id == "A.9.4.2"
    assert hit.linked_by_control.label() == (
        "linked by control AC-7 (Unsuccessful Logon Attempts) through ISO/IEC 27001:2013 "
        "A.9.4.2, accepted")


def test_control_ids_are_read_as_vendors_write_them():
    parsed = parse_controls("AC-2 (1); ac-2.1; AC-02 (01); A.9.4.2; IAM-02.1", "cell")
    assert [(c.framework, c.id) for c in parsed] == [
        ("NIST SP 800-53 Rev. 5", "AC-2(1)"), ("ISO/IEC 27001:2013", "A.9.4.2"),
        ("CSA CAIQ v4", "IAM-02.1")]
    with pytest.raises(UserInputError, match="'GNRL-01' is not a control id"):
        parse_controls("GNRL-01", "cell")


@pytest.mark.model
def test_plain_words_reach_a_control_answer_that_shares_none_of_them(tmp_path, real_embedder):
    """The catalog's title and statement join the text an answer is searched by (never the
    text shown): "wrong passwords" meets AC-7's answer though the vendor wrote none of it."""
    bench = Workbench(Settings(store=tmp_path / "store"), embedder=real_embedder,
                      reranker=FakeReranker())
    delegated = ("NA - User management is delegated to each organization's enterprise user "
                 "management system.")
    answers = {"AC-7": delegated,
               "AC-2": "Accounts are requested through the service desk and approved.",
               "IA-5": "Passwords are at least fourteen characters long.",
               "SC-8": "Every connection uses TLS 1.2 or later.",
               "CP-9": "Copies are taken nightly and kept for thirty days.",
               "AU-11": "Records are kept for a year."}
    bench.ingest_questionnaire({
        "vendor_id": "gov", "round_number": 1, "timestamp": "2026-01-05T10:00:00Z",
        "responses": [{"criterion_question_text": control, "question_text": control,
                       "questionnaire_id": control, "answer_text": text}
                      for control, text in answers.items()]})
    criterion = "Lock an account after a run of wrong passwords"
    trace = bench.retrieve("gov", criterion, "semantic")
    first = trace.first_stage[0]
    assert first.metadata["questionnaire_id"] == "AC-7" and first.text.endswith(delegated)
    assert "Unsuccessful" not in first.text  # searched by the catalog's words, shown as sent
    proposed = bench.controls.proposer.propose(criterion)
    assert "AC-7" in [p.control.id for p in proposed[:3]]
    linked = bench.retrieve("gov", criterion, "precedence")
    assert linked.current_answer.questionnaire_id == "AC-7"
    assert linked.current_answer.linked_by_control.status == "proposed"


def test_an_excerpt_from_one_sheet_has_the_other_sheets_answer_beside_it(
        matrix_vendor, capsys, tmp_path, monkeypatch):
    # Decided: no control answers it, so the answers compete as excerpts; the one the search
    # ranks (one place only) brings the other sheet's answer to the same question, not
    # counted against the excerpts' places.
    monkeypatch.setenv("EVIDENCE_TOP_RERANKED_N", "1")
    criteria = criteria_csv(tmp_path / "criteria.csv", [("TLS 1.2 on every connection", "")])
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                                criteria)
    assert code == 0, err
    evidence = lines[0]["evidence"]
    assert len(evidence) == 2
    tls = [c for c in evidence if c["metadata"].get("questionnaire_id") == "SC-8"]
    assert sorted(c["metadata"]["origin_sheet"] for c in tls) == ["Cloud CRM",
                                                                  "On-Premises CRM"]
    beside = [c for c in tls if c["other_sheet_of"]]
    assert len(beside) == 1 and beside[0]["other_sheet_of"] in {c["id"] for c in tls}
    assert "the same question answered on another sheet of the round" in lines[0]["prompt"]
    # Two places hold two questions, each with both sheets' answers: one question's answers
    # are not competitors for the places.
    monkeypatch.setenv("EVIDENCE_TOP_RERANKED_N", "2")
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                                criteria)
    evidence = lines[0]["evidence"]
    questions = [c["metadata"]["questionnaire_id"] for c in evidence]
    assert len(evidence) == 4 and len(set(questions)) == 2
    assert all(questions.count(q) == 2 for q in questions)


def test_the_lexical_index_finds_an_answer_by_its_controls_catalog_words(matrix_vendor,
                                                                         capsys, tmp_path):
    # Words the catalog's AC-7 statement holds and neither answer does: BM25 finds both
    # answers by them, and returns the vendor's text alone.
    criteria = criteria_csv(tmp_path / "criteria.csv", [("consecutive invalid logon", "")])
    code, lines, err = run_json(capsys, "retrieve", "--vendor", "acme", "--criteria-file",
                                criteria, "--strategy", "hybrid")
    assert code == 0, err
    lexical = [c for c in lines[0]["first_stage"] if c["lexical_rank"] is not None]
    assert {c["metadata"]["questionnaire_id"] for c in lexical} == {"AC-7"}
    assert len(lexical) == 2
    assert all("consecutive" not in c["text"] and "\u2063" not in c["text"] for c in lexical)
    # The index holds the catalog's words beside the text, and its check agrees.
    code, lines, err = run_json(capsys, "check", "--vendor", "acme", "--dry-run")
    assert code == 0 and lines[0]["ok"], lines
