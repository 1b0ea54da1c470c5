"""The relevance lab: judgments that follow content, trec_eval's rank metrics on the context's
order, `evidence eval` with per-criterion deltas, and a gate that fails a worse setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import Settings
from core.criteria import CriterionEntry
from core.errors import UserInputError
from core.outputs.relevance import (
    Choice,
    Judgments,
    context_ranking,
    evaluate,
    judge,
    rank_metrics,
    read_judgments,
)
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.cli import run_main
from tests.support.payloads import response, round_payload

pytest_plugins = ["tests.llm_stub"]

AES = "Does the vendor encrypt data at rest using AES-256?"
TLS = "Does the vendor encrypt data in transit using TLS 1.2 or higher?"
FILLER = ("This section is reviewed by the security team each year and approved by the "
          "chief information security officer before it is published to every employee. ")
POLICY = f"""# Encryption standard

## Data at rest

Customer data at rest is encrypted with AES-256 in every storage tier, including backups.
{FILLER * 4}

## Data in transit

All connections use TLS 1.2 or higher; TLS 1.0 and 1.1 are disabled at the load balancer.
{FILLER * 4}

## Key management

Encryption keys are kept in a managed key service and rotated every year.
{FILLER * 4}

## Physical security

Data centres are staffed around the clock and entry needs a badge and a PIN.
{FILLER * 4}
"""


def test_the_metrics_are_trec_evals_on_the_context_order():
    grades = {"a": 3, "b": 1, "c": 0, "d": 2}
    found = rank_metrics(["b", "x", "a"], grades)
    # DCG = 1/log2(2) + 3/log2(4) = 2.5; ideal 3 + 2/log2(3) + 1/log2(4) = 4.7619
    assert found["ndcg@6"] == pytest.approx(2.5 / (3 + 2 / 1.5849625 + 0.5), abs=1e-5)
    assert found["mrr"] == 1.0
    assert found["precision@6"] == pytest.approx(2 / 6)
    assert found["recall@6"] == pytest.approx(2 / 3)
    assert rank_metrics(["x", "a"], grades)["mrr"] == 0.5
    assert rank_metrics([], grades)["ndcg@10"] == 0.0


@pytest.fixture
def lab(tmp_path) -> Workbench:
    workbench = Workbench(Settings(store=tmp_path / "store",
                                   reranker_cache_dir=tmp_path / "no-models"),
                          embedder=FakeEmbedder(), reranker=FakeReranker())
    policy = tmp_path / "docs" / "encryption_standard.md"
    policy.parent.mkdir()
    policy.write_text(POLICY, encoding="utf-8")
    workbench.ingest_documents("acme", [policy])
    workbench.ingest_questionnaire(round_payload(1, [
        response("Is stored data encrypted?", "Yes, AES-256 everywhere.", AES),
        response("Which TLS versions do you accept?", "TLS 1.2 and 1.3 only.", TLS)]))
    return workbench


def excerpt(workbench: Workbench, criterion: str, needle: str):
    trace = workbench.retrieve("acme", criterion, "semantic")
    return next(c for c in trace.evidence if needle in c.text)


def test_a_judgment_follows_the_content_through_a_new_version(lab, tmp_path):
    at_rest = excerpt(lab, AES, "AES-256 in every storage tier")
    judge(lab.store, "acme", AES, at_rest.id, at_rest.text, 3, source=at_rest.source)
    # A new version of the policy: every chunk gets a new id, the judged one keeps its text.
    policy = tmp_path / "docs" / "encryption_standard.md"
    policy.write_text(POLICY.replace("a badge and a PIN", "a badge and a palm scan"),
                      encoding="utf-8")
    lab.ingest_documents("acme", [policy])
    again = excerpt(lab, AES, "AES-256 in every storage tier")
    assert again.id != at_rest.id
    ranked = {r.id: r.sha for r in context_ranking(lab.retrieve("acme", AES, "semantic"))}
    assert Judgments(lab.store, "acme").grades(AES) == {ranked[again.id]: 3}
    # Judged again, the grade is replaced, not added.
    judge(lab.store, "acme", AES, again.id, again.text, 2)
    assert list(Judgments(lab.store, "acme").grades(AES).values()) == [2]
    assert Judgments(lab.store, "acme").grades(TLS) == {}


def write_csv(path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["vendor_id", "criterion", "id", "grade"])
        writer.writerows(rows)
    return path


def test_judgments_are_read_from_a_csv_and_from_qrels(lab, tmp_path):
    at_rest = excerpt(lab, AES, "AES-256 in every storage tier")
    transit = excerpt(lab, TLS, "TLS 1.2 or higher")
    criteria = [CriterionEntry(AES, id="ENC-1"), CriterionEntry(TLS)]
    csv_file = write_csv(tmp_path / "j.csv", [("acme", AES, at_rest.id, "3"),
                                              ("acme", TLS, transit.id, "2"),
                                              ("globex", AES, "other-vendor", "3")])
    read = read_judgments(csv_file, lab.store, "acme", criteria)
    assert [(j.criterion, j.grade) for j in read] == [(AES, 3), (TLS, 2)]
    qrels = tmp_path / "j.qrels"
    qrels.write_text(f"ENC-1 0 {at_rest.id} 3\n2 0 {transit.id} 2\n", encoding="utf-8")
    assert [(j.criterion, j.grade, j.excerpt_sha) for j in read_judgments(
        qrels, lab.store, "acme", criteria)] == [(j.criterion, j.grade, j.excerpt_sha)
                                                  for j in read]
    for rows, needle in (([("acme", AES, "no-such-id", "3")], "no-such-id"),
                         ([("acme", AES, at_rest.id, "5")], "0, 1, 2 or 3"),
                         ([("acme", AES, at_rest.id, "high")], "0, 1, 2 or 3")):
        with pytest.raises(UserInputError, match=needle):
            read_judgments(write_csv(tmp_path / "bad.csv", rows), lab.store, "acme", criteria)


def test_evaluate_scores_what_each_choice_puts_first(lab):
    at_rest = excerpt(lab, AES, "AES-256 in every storage tier")
    physical = excerpt(lab, AES, "badge and a PIN")
    judge(lab.store, "acme", AES, at_rest.id, at_rest.text, 3)
    judge(lab.store, "acme", AES, physical.id, physical.text, 0)
    judgments = Judgments(lab.store, "acme").all()
    criteria = [CriterionEntry(AES), CriterionEntry(TLS)]
    full, narrow = evaluate(lab, "acme", criteria, [
        Choice(strategy="semantic"),
        Choice(strategy="semantic", settings={"EVIDENCE_TOP_RERANKED_N": "1"})], judgments)
    assert full.line()["criteria"] == 1  # TLS has no relevant judgment: not averaged
    assert full.line()["recall@6"] == 1.0
    [aes] = [c for c in narrow.criteria if c.criterion == AES]
    ranked = [r.id for r in context_ranking(lab.retrieve("acme", AES, "semantic"))]
    if ranked.index(at_rest.id) > 0:  # one excerpt kept: the judged one only if it led
        assert aes.metrics["recall@6"] == 0.0 and aes.missed[0]["id"] == at_rest.id


def test_the_command_prints_metrics_deltas_and_gates_a_worse_setting(lab, tmp_path, capfd,
                                                                     monkeypatch):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    at_rest = excerpt(lab, AES, "AES-256 in every storage tier")
    transit = excerpt(lab, TLS, "TLS 1.2 or higher")
    judgments = write_csv(tmp_path / "j.csv", [("acme", AES, at_rest.id, "3"),
                                               ("acme", TLS, transit.id, "3")])
    criteria = tmp_path / "criteria.txt"
    criteria.write_text(f"{AES}\n{TLS}\n", encoding="utf-8")
    store = str(lab.settings.store)
    base = ["--store", store, "eval", "--vendor", "acme", "--criteria-file", str(criteria),
            "--judgments", str(judgments)]
    code, out, err = run_main(capfd, *base, "--strategy", "semantic", "--keep", clear=True)
    assert code == 0 and "2 judgments kept" in err, err
    assert sorted(Judgments(lab.store, "acme").grades(AES).values()) == [3]
    code, out, err = run_main(capfd, *base, "--compare",
                              "strategy:semantic,settings:EVIDENCE_TOP_RERANKED_N=1",
                              clear=True)
    assert code == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    strategies = [x for x in lines if "strategy" in x and not x.get("compared")]
    assert [x["strategy"] for x in strategies] == ["semantic", "hash_extraction", "doc_boost",
                                                   "tiered", "precedence", "hybrid"]
    for line in strategies:
        assert {"ndcg@6", "ndcg@10", "mrr", "precision@6", "recall@6", "criteria",
                "judged"} <= set(line)
        assert line["criteria"] == 2 and line["judged"] == 2
    deltas = [x for x in lines if "compare" in x]
    assert [d["criterion"] for d in deltas] == [AES, TLS]
    assert deltas[0]["compare"] == ["semantic", "semantic EVIDENCE_TOP_RERANKED_N=1"]

    baseline = tmp_path / "baseline.jsonl"
    code, out, err = run_main(capfd, *base, "--strategy", "semantic", clear=True)
    baseline.write_text(out, encoding="utf-8")
    code, out, err = run_main(capfd, *base, "--strategy", "semantic", "--baseline",
                              str(baseline), "--fail-below", clear=True)
    assert code == 0, err
    # A deliberately worse setting: one excerpt in the context, the other judged one lost.
    monkeypatch.setenv("EVIDENCE_TOP_RERANKED_N", "1")
    monkeypatch.setenv("EVIDENCE_MAX_FOLLOWUP_ROUNDS", "1")
    code, out, err = run_main(capfd, *base, "--strategy", "semantic", "--baseline",
                              str(baseline), "--fail-below", clear=True)
    assert code == 1, err
    assert err.startswith("evidence: error: below the baseline") and "semantic" in err


def test_the_command_refuses_what_it_cannot_measure(lab, tmp_path, capfd, monkeypatch):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    criteria = tmp_path / "criteria.txt"
    criteria.write_text(f"{AES}\n", encoding="utf-8")
    base = ["--store", str(lab.settings.store), "eval", "--vendor", "acme",
            "--criteria-file", str(criteria)]
    for extra, needle in ((["--fail-below"], "--baseline"), ([], "judged relevant"),
                          (["--compare", "strategy:semantic"], "two choices"),
                          (["--strategy", "magic"], "magic")):
        code, out, err = run_main(capfd, *base, *extra, clear=True)
        assert (code, out) == (2, ""), err
        assert len(err.strip().splitlines()) == 1 and needle in err


def test_suggested_grades_are_kept_apart_and_never_counted(lab, tmp_path, capfd, monkeypatch,
                                                           llm_stub):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    at_rest = excerpt(lab, AES, "AES-256 in every storage tier")
    judge(lab.store, "acme", AES, at_rest.id, at_rest.text, 3)
    llm_stub.enqueue({"grades": [{"index": i, "grade": 0} for i in range(1, 30)]})
    criteria = tmp_path / "criteria.txt"
    criteria.write_text(f"{AES}\n", encoding="utf-8")
    base = ["--store", str(lab.settings.store), "eval", "--vendor", "acme",
            "--criteria-file", str(criteria), "--strategy", "semantic"]
    code, before, err = run_main(capfd, *base, clear=True)
    assert code == 0, err
    code, after, err = run_main(capfd, *base, "--suggest", clear=True)
    assert code == 0, err
    assert "grades suggested by" in err and len(llm_stub.requests) == 1
    # The judged excerpt was not sent again; the model's grades changed no figure.
    prompt = llm_stub.requests[0].messages[0]["content"]
    assert "AES-256 in every storage tier" not in prompt and "badge and a PIN" in prompt
    assert after == before
    suggested = Judgments(lab.store, "acme").all(judged_by="model")
    assert suggested and {j.grade for j in suggested} == {0}
    assert [j.grade for j in Judgments(lab.store, "acme").all()] == [3]
