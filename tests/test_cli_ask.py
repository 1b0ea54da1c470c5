"""`evidence ask` and `evidence conversations` as CONTRACT.md describes them (in process,
with the fake embedder behind the command)."""

from __future__ import annotations

from functools import partial

import pytest

from core.cli import main
from core.workbench import Workbench
from tests.conftest import SAMPLE_DATA
from tests.fakes import point_the_command_at
from tests.support.cli import error_message, is_object, run_json

CONTRACT_KEYS = {"vendor_id", "conversation_id", "turn", "question", "search_query",
                 "continuation", "history", "anchor_documents", "answer", "answered_by",
                 "answer_evidence", "suggestion_evidence", "followups", "timings_ms"}
EVIDENCE_KEYS = {"id", "source", "text", "vector_rank", "lexical_rank", "fused_score",
                 "anchor_boost", "rerank_score", "final_score"}


@pytest.fixture
def cli(workbench: Workbench, monkeypatch):
    for vendor in ("acme", "northwind"):
        workbench.ingest_documents(vendor, sorted(
            (SAMPLE_DATA / "vendors" / vendor / "documents").glob("*.md")))
    point_the_command_at(workbench, monkeypatch)
    return workbench


run = partial(run_json, keep=is_object)  # `ask --format text` prints text around the records


def test_ask_prints_one_turn_with_the_contract_keys(cli, capsys):
    code, [turn], err = run(capsys, "ask", "--vendor", "acme", "How are backups protected?")
    assert code == 0
    assert set(turn) >= CONTRACT_KEYS
    assert turn["turn"] == 1 and turn["answered_by"] == "excerpts"
    assert set(turn["continuation"]) >= {"is_continuation", "reason", "decided_by"}
    assert len(turn["answer_evidence"]) == 4 and len(turn["suggestion_evidence"]) == 2
    for evidence in turn["answer_evidence"] + turn["suggestion_evidence"]:
        assert set(evidence) >= EVIDENCE_KEYS
        assert evidence["rerank_score"] is None  # no reranker model here: null, as promised
    assert "total" in turn["timings_ms"]

    code, [again], _ = run(capsys, "ask", "--vendor", "acme", "--conversation",
                           turn["conversation_id"], "How often are they tested?")
    assert again["turn"] == 2 and again["history"][0] == {
        "turn": 1, "role": "assistant", "text": turn["answer"], "why": "recent"}

    code, summaries, _ = run(capsys, "conversations", "--vendor", "acme")
    assert code == 0 and [(s["conversation_id"], s["turns"]) for s in summaries] == [
        (turn["conversation_id"], 2)]
    assert set(summaries[0]) >= {"conversation_id", "turns", "started", "last"}
    code, shown, _ = run(capsys, "conversations", "--vendor", "acme", "--show",
                         turn["conversation_id"])
    assert [t["question"] for t in shown] == ["How are backups protected?",
                                              "How often are they tested?"]
    assert shown[0] == turn


def test_ask_text_prints_the_answer_and_says_it_was_not_generated(cli, capsys):
    code = main(["ask", "--vendor", "acme", "--format", "text", "How are backups protected?"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Conversation c-") and "turn 1: starts a topic." in out
    assert "nothing below was generated" in out and "[1] " in out


@pytest.mark.parametrize("argv, needle", [
    (["ask", "--vendor", "acme", ""], "The question is empty"),
    (["ask", "--vendor", "acme", "x" * 2001], "2001 characters long"),
    (["ask", "--vendor", "acme", "--conversation", "c-000000000000", "Why?"],
     "has no conversation c-000000000000"),
    (["ask", "--vendor", "acme", "--conversation", "../etc", "Why?"], "is not valid"),
    (["ask", "--vendor", "globex", "Why?"], "No evidence is stored for vendor 'globex'"),
    (["conversations", "--vendor", "acme", "--show", "c-000000000000"],
     "has no conversation"),
])
def test_refusals_exit_2_in_one_sentence_and_write_nothing(cli, capsys, argv, needle):
    code, lines, err = run(capsys, *argv)
    assert code == 2 and lines == []
    assert needle in error_message(err)
    assert cli.conversations("acme") == []


def test_a_conversation_of_another_vendor_is_refused_as_unknown(cli, capsys):
    _, [theirs], _ = run(capsys, "ask", "--vendor", "northwind", "How is data encrypted?")
    code, lines, err = run(capsys, "ask", "--vendor", "acme", "--conversation",
                           theirs["conversation_id"], "Can you elaborate on that?")
    assert code == 2 and lines == []
    assert f"Vendor 'acme' has no conversation {theirs['conversation_id']}" in err
    _, listed, _ = run(capsys, "conversations", "--vendor", "acme")
    assert listed == []
