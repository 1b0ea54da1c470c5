"""Seed 002 ("Follow-up Document Boost"): its integration tests and manual validations, for
`doc_boost` (the seed exactly) and `precedence` (which boosts documents the same way).

The fake reranker scores a passage by the share of the criterion's 10 content words it holds
(vendor, encrypt, customer, backups, rest, using, aes, 256, rotated, keys), so every score
below is exact: a follow-up document holding 8 words scores 0.8 x 1.15 = 0.92 and beats an
original holding 9 (0.9); one holding 7 scores 0.805 and does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.workbench import Workbench
from tests.support import payloads
from tests.support.layouts import seed_context

VENDOR = "acme"
CRITERION = "Does the vendor encrypt customer backups at rest using AES-256 with rotated keys?"
BOTH = pytest.mark.parametrize("strategy", ["doc_boost", "precedence"])

ORIGINAL_9 = "The vendor will encrypt customer backups at rest using AES-256 keys."
FILLERS = {  # five more original documents, each sharing 2 or 3 criterion words
    "backup_retention.md": "Customer backups are kept for 35 days in a second region.",
    "backup_checks.md": "Backups at rest are checked by the vendor every week.",
    "signing_keys.md": "The vendor rotated its signing keys last year.",
    "records.md": "Customer records are kept using a retention schedule.",
    "exports.md": "AES-256 is the approved cipher for customer exports.",
    "visitors.md": "Visitors sign the register at the front desk.",
}
FOLLOWUP_8 = "The vendor began to encrypt backups at rest using AES-256 keys in March."
FOLLOWUP_7 = "The vendor began to encrypt backups at rest using AES-256 in March."
IRRELEVANT = "Our office moved to a new building; keys are handed out at reception."


def write(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return folder


def setup_vendor(bench: Workbench, tmp_path: Path, followup_docs: dict[str, str],
                 original: str = ORIGINAL_9) -> None:
    tc = write(tmp_path / "tc", {"encryption_policy.md": original, **FILLERS})
    bench.ingest_documents(VENDOR, [tc])
    uploads = write(tmp_path / "uploads", followup_docs)
    bench.ingest_documents(VENDOR, [uploads], doc_type="followup_document", round_number=2)


def by_source(candidates, source):
    [found] = [c for c in candidates if c.source == source]
    return found


@BOTH
def test_end_to_end_with_a_followup_document_in_the_vendor_namespace(workbench, tmp_path,
                                                                      strategy):
    setup_vendor(workbench, tmp_path, {"encryption_update.md": FOLLOWUP_8})

    [status] = workbench.status(VENDOR)
    assert status.by_type == {"followup_document": 1, "tc_files": 7}
    assert status.documents == 8
    trace = workbench.retrieve(VENDOR, CRITERION, strategy)

    update = by_source(trace.evidence, "encryption_update.md")
    assert update.type == "followup_document"
    assert update.round_number == 2
    assert update.text == FOLLOWUP_8
    assert "<source>encryption_update.md</source>" in seed_context(trace)
    assert len(trace.evidence) == 6
    assert trace.followups == []


@BOTH
def test_followup_document_beats_the_original_when_scores_are_close(workbench, tmp_path,
                                                                     strategy):
    setup_vendor(workbench, tmp_path, {"encryption_update.md": FOLLOWUP_8})

    trace = workbench.retrieve(VENDOR, CRITERION, strategy)

    update = by_source(trace.reranked, "encryption_update.md")
    original = by_source(trace.reranked, "encryption_policy.md")
    assert update.rerank_score == pytest.approx(0.8)
    assert original.rerank_score == pytest.approx(0.9)
    assert update.boost == pytest.approx(1.15)
    assert update.final_score == pytest.approx(0.92)
    assert (update.rank_before_boost, update.rank_after_boost) == (2, 1)
    assert (original.rank_before_boost, original.rank_after_boost) == (1, 2)
    assert original.boost == 1.0
    assert [c.source for c in trace.evidence[:2]] == ["encryption_update.md",
                                                      "encryption_policy.md"]
    assert seed_context(trace).index("encryption_update.md") < seed_context(trace).index(
        "encryption_policy.md")


@BOTH
def test_original_wins_when_significantly_more_relevant(workbench, tmp_path, strategy):
    setup_vendor(workbench, tmp_path, {"encryption_update.md": FOLLOWUP_7})

    trace = workbench.retrieve(VENDOR, CRITERION, strategy)

    update = by_source(trace.reranked, "encryption_update.md")
    original = by_source(trace.reranked, "encryption_policy.md")
    assert update.rerank_score == pytest.approx(0.7)
    assert update.boost == pytest.approx(1.15)
    assert update.final_score == pytest.approx(0.805)
    assert (original.rank_before_boost, original.rank_after_boost) == (1, 1)
    assert (update.rank_before_boost, update.rank_after_boost) == (2, 2)
    assert [c.source for c in trace.evidence[:2]] == ["encryption_policy.md",
                                                      "encryption_update.md"]


@BOTH
def test_irrelevant_followup_documents_do_not_dominate(workbench, tmp_path, strategy):
    setup_vendor(workbench, tmp_path, {
        "office_move.md": IRRELEVANT,
        "canteen.md": "The canteen menu changes every Monday.",
    })

    trace = workbench.retrieve(VENDOR, CRITERION, strategy)

    assert len(trace.evidence) == 6
    assert {c.type for c in trace.evidence} == {"tc_files"}
    assert "office_move.md" not in seed_context(trace)
    assert "canteen.md" not in seed_context(trace)
    office = by_source(trace.reranked, "office_move.md")
    assert office.rerank_score == pytest.approx(0.1)
    assert office.boost == pytest.approx(1.15)
    assert office.final_score == pytest.approx(0.115)
    assert office.rank_after_boost == 7  # boosted, still below all six relevant originals


@BOTH
def test_boost_is_never_applied_to_original_documents(workbench, tmp_path, strategy):
    setup_vendor(workbench, tmp_path, {"encryption_update.md": FOLLOWUP_8})
    soc2_text = "SOC 2: customer backups at rest are encrypted by the vendor."
    soc2 = write(tmp_path / "soc2", {"soc2_summary.md": soc2_text})
    workbench.ingest_documents(VENDOR, [soc2], doc_type="soc2_summary:security")

    trace = workbench.retrieve(VENDOR, CRITERION, strategy)

    others = [c for c in trace.reranked if c.type != "followup_document"]
    assert {c.type for c in others} == {"tc_files", "soc2_summary:security"}
    for c in others:
        assert c.boost == 1.0
        assert c.final_score == pytest.approx(c.rerank_score)
    assert by_source(trace.reranked, "soc2_summary.md").rerank_score == pytest.approx(0.4)
    boosted = [c for c in trace.reranked if c.boost != 1.0]
    assert [c.source for c in boosted] == ["encryption_update.md"]


def test_semantic_strategy_applies_no_boost(workbench, tmp_path):
    setup_vendor(workbench, tmp_path, {"encryption_update.md": FOLLOWUP_8,
                                       "office_move.md": IRRELEVANT})

    trace = workbench.retrieve(VENDOR, CRITERION, "semantic")

    assert trace.reranked
    for c in trace.reranked:
        assert c.boost == 1.0
        assert c.final_score == pytest.approx(c.rerank_score)
        assert c.rank_before_boost == c.rank_after_boost
    assert all(c.boost == 1.0 for c in trace.evidence)
    # Without the boost the closer original stays ahead of the 0.8 follow-up document.
    assert [c.source for c in trace.evidence[:2]] == ["encryption_policy.md",
                                                      "encryption_update.md"]
    assert by_source(trace.evidence, "encryption_update.md").final_score == pytest.approx(0.8)


def test_precedence_combines_boosted_documents_with_linked_answers_last(workbench, tmp_path):
    setup_vendor(workbench, tmp_path, {"encryption_update.md": FOLLOWUP_8})
    workbench.ingest_questionnaire(payloads.round_payload(
        2, [payloads.response("Are backup keys rotated?", "Yes.", CRITERION)], vendor=VENDOR,
        timestamp="2024-03-01T09:00:00Z"))

    trace = workbench.retrieve(VENDOR, CRITERION, "precedence")

    assert trace.evidence[0].source == "encryption_update.md"
    assert trace.evidence[0].boost == pytest.approx(1.15)
    assert [f.answer_text for f in trace.followups] == ["Yes."]
    assert seed_context(trace).rstrip().endswith(
        "<index_7>\n<source>Follow-up Questionnaire Round 2</source>\n<content>\n"
        "Question: Are backup keys rotated? Answer: Yes.\n</content>\n</index_7>")
