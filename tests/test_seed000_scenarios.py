"""Seed 000 ("Post-Retrieval Hash Extraction"): one test per row of its Testing Scenarios
table, for `hash_extraction` (the seed exactly) and `precedence` (which lays the context out
the same way), on the fake models over a real ChromaDB store."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from core.config import Settings
from core.hashing import criterion_hash
from core.retrieval.tiers import question_similarity
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads
from tests.support.layouts import seed_context

VENDOR = "acme"
BOTH = pytest.mark.parametrize("strategy", ["hash_extraction", "precedence"])

# Eight policy excerpts sharing 7, 6, 5, 4, 3, 2, 1 and 0 of the criterion's 7 content words
# (vendor, encrypt, data, rest, using, aes, 256): the fake reranker scores them k/7, so the
# reranked order is exact and the last one falls below the relevancy cutoff.
DOCS = {
    "01_encryption_standard.md":
        "Policy: the vendor shall encrypt data at rest using AES-256 for all production systems.",
    "02_disk_protection.md":
        "Customer data at rest is protected using AES-256 disk encryption managed by the vendor.",
    "03_backups.md": "Backups hold data at rest and are sealed with AES-256 by the vendor.",
    "04_databases.md": "Database volumes keep data at rest under AES-256 keys.",
    "05_laptops.md": "Laptop disks rely on AES-256 full disk protection at rest.",
    "06_retention.md": "The vendor reviews data retention annually.",
    "07_training.md": "Staff complete security awareness training using an online course.",
    "08_visitors.md": "Office visitors sign in at reception.",
}
DOC_ORDER = sorted(DOCS)


round_payload = partial(payloads.round_payload, vendor=VENDOR)
linked = partial(payloads.response, criterion=AES_CRITERION)


def ingest_docs(bench: Workbench, folder: Path, docs: dict[str, str] = DOCS) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    bench.ingest_documents(VENDOR, [folder])


def entry(index: int, source: str, content: str) -> str:
    return (f"<index_{index}>\n<source>{source}</source>\n<content>\n{content}\n</content>\n"
            f"</index_{index}>")


@pytest.fixture
def docs_bench(workbench, tmp_path) -> Workbench:
    ingest_docs(workbench, tmp_path / "docs")
    return workbench


# Row 1: no follow-ups in the index --------------------------------------------------------

@BOTH
def test_no_followups_gives_only_the_six_reranked_excerpts(docs_bench, strategy):
    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert trace.followups == []
    assert [c.source for c in trace.evidence] == DOC_ORDER[:6]
    assert [c.rerank_score for c in trace.evidence] == pytest.approx(
        [7 / 7, 6 / 7, 5 / 7, 4 / 7, 3 / 7, 2 / 7])
    for i in range(1, 7):
        assert f"<index_{i}>" in seed_context(trace)
    assert "<index_7>" not in seed_context(trace)
    assert "Follow-up" not in seed_context(trace)
    assert seed_context(trace) == "\n".join(
        entry(i, DOC_ORDER[i - 1], DOCS[DOC_ORDER[i - 1]]) for i in range(1, 7))


# Row 2: a single follow-up matches --------------------------------------------------------

@BOTH
def test_single_followup_is_a_standard_entry_at_index_7(docs_bench, strategy):
    answer = "Yes, AES-256 protects all customer data."
    docs_bench.ingest_questionnaire(round_payload(1, [linked(AES_CRITERION, answer)]))

    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [f.round_number for f in trace.followups] == [1]
    hit = trace.followups[0]
    assert hit.hash_match is True
    assert hit.answer_text == answer
    assert len(trace.evidence) == 6
    assert all(not c.id.startswith("followup-") for c in trace.evidence)
    expected_last = entry(7, "Follow-up Questionnaire Round 1",
                          f"Question: {AES_CRITERION} Answer: {answer}")
    assert seed_context(trace).endswith("\n" + expected_last)
    assert seed_context(trace).count("<index_7>") == 1
    assert "<index_8>" not in seed_context(trace)


# Row 3: three follow-ups (rounds 1, 2, 3) --------------------------------------------------

@BOTH
def test_three_rounds_are_one_combined_progression_at_index_7(docs_bench, strategy):
    answers = {1: "We are evaluating it.", 2: "Rollout is in progress.", 3: "Yes, AES-256."}
    for rnd in (3, 1, 2):  # ingest order must not matter
        docs_bench.ingest_questionnaire(
            round_payload(rnd, [linked(AES_CRITERION, answers[rnd])]))

    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [f.round_number for f in trace.followups] == [1, 2, 3]
    assert trace.dropped_followups == []
    progression = "\n\n".join(
        f"[Round {r}]\nQuestion: {AES_CRITERION}\nAnswer: {answers[r]}" for r in (1, 2, 3))
    expected_last = entry(7, "Follow-up Questionnaire Round 3 (Multiple Rounds)", progression)
    assert seed_context(trace).endswith("\n" + expected_last)
    assert seed_context(trace).count("(Multiple Rounds)") == 1
    assert "<index_8>" not in seed_context(trace)


# Row 4: five follow-ups (rounds 1-5) -------------------------------------------------------

@BOTH
def test_five_rounds_keep_only_rounds_3_4_5(docs_bench, strategy):
    for rnd in range(1, 6):
        docs_bench.ingest_questionnaire(
            round_payload(rnd, [linked(AES_CRITERION, f"Answer given in round {rnd}.")]))

    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert [f.round_number for f in trace.followups] == [3, 4, 5]
    dropped = {d.followup.round_number: d.reason for d in trace.dropped_followups}
    assert sorted(dropped) == [1, 2]
    for rnd, reason in dropped.items():
        assert f"round {rnd}" in reason
        assert "MAX_FOLLOWUP_ROUNDS" in reason
    assert "(Multiple Rounds)" in seed_context(trace)
    last = seed_context(trace).rsplit("<index_", 1)[1]
    assert last.startswith("7>")
    assert last.index("[Round 3]") < last.index("[Round 4]") < last.index("[Round 5]")
    assert "round 1." not in seed_context(trace) and "round 2." not in seed_context(trace)
    # Dropped rounds are not turned into ordinary excerpts either.
    dropped_ids = {d.followup.id for d in trace.dropped_followups}
    assert dropped_ids.isdisjoint(c.id for c in trace.reranked)
    assert dropped_ids.isdisjoint(c.id for c in trace.evidence)


# Row 5: a follow-up with a different hash --------------------------------------------------

OTHER_CRITERION = "Does the vendor rotate encryption keys annually?"


@BOTH
def test_followup_with_a_different_hash_goes_to_the_reranker(docs_bench, strategy):
    assert criterion_hash(OTHER_CRITERION) != criterion_hash(AES_CRITERION)
    docs_bench.ingest_questionnaire(round_payload(1, [linked(
        "Is data at rest encrypted with AES-256 by the vendor?",
        "Yes, we encrypt data at rest using AES-256.", criterion=OTHER_CRITERION)]))

    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert trace.followups == []
    assert "(Multiple Rounds)" not in seed_context(trace)
    assert "<index_7>" not in seed_context(trace)
    [unlinked] = [c for c in trace.reranked if c.id.startswith("followup-")]
    assert unlinked.rerank_score == pytest.approx(1.0)  # all 7 criterion words
    assert unlinked.type == "followup_response:1"
    assert unlinked.id in {c.id for c in trace.evidence}
    assert "<source>Follow-up Questionnaire Round 1</source>" in seed_context(trace)
    assert all(h.id != unlinked.id for h in trace.hash_path or [])
    assert len(trace.evidence) == 6


# Row 6: modified question, hash matches ----------------------------------------------------

REWORDED = "Which cipher protects stored customer information?"


@BOTH
def test_modified_question_with_matching_hash_is_still_extracted(docs_bench, strategy):
    docs_bench.ingest_questionnaire(round_payload(1, [linked(REWORDED, "AES-256.")]))

    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    [hit] = trace.followups
    expected = question_similarity(AES_CRITERION, REWORDED)
    assert expected < 0.7
    assert hit.question_similarity == pytest.approx(round(expected, 4))
    assert hit.hash_match is True
    assert hit.tier == "medium"
    assert hit.tier_reason == (
        f"hash match; question reworded, similarity {expected:.2f} < 0.70: medium")
    assert seed_context(trace).endswith(
        "\n" + entry(7, "Follow-up Questionnaire Round 1",
                     f"Question: {REWORDED} Answer: AES-256."))


# Beyond the table: the seed's invariants ---------------------------------------------------

@BOTH
def test_hash_linked_followups_never_reach_the_reranker(docs_bench, strategy):
    for rnd in (1, 2):
        docs_bench.ingest_questionnaire(round_payload(rnd, [linked(
            AES_CRITERION, f"Round {rnd}: the vendor encrypts data at rest using AES-256.")]))

    trace = docs_bench.retrieve(VENDOR, AES_CRITERION, strategy)

    linked_ids = {f.id for f in trace.followups}
    assert len(linked_ids) == 2
    # They sit in the first stage with high similarity, yet are not reranked.
    assert linked_ids <= {c.id for c in trace.first_stage}
    assert linked_ids.isdisjoint(c.id for c in trace.reranked)
    assert linked_ids.isdisjoint(c.id for c in trace.evidence)
    assert [c.source for c in trace.evidence] == DOC_ORDER[:6]


def many_chunks_bench(tmp_path: Path) -> Workbench:
    """130 one-paragraph chunks sharing 1..7 criterion words, plus one linked follow-up."""
    settings = Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "models",
                        chunk_size=200, chunk_overlap=0)
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    crit = ["vendor", "encrypt", "data", "rest", "using", "AES", "256"]
    paragraphs = [
        f"Section {i}: control sys{i} covers {' '.join(crit[: i % 7 + 1])} item{i} area{i % 13}. "
        f"The owner reviews the evidence quarterly and records it in register{i}."
        for i in range(130)
    ]
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "controls.md").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    report = bench.ingest_documents(VENDOR, [folder])
    assert report.chunks_written == 130
    bench.ingest_questionnaire(round_payload(1, [linked(AES_CRITERION, "Yes.")]))
    return bench


@BOTH
def test_only_the_top_70_by_first_stage_score_are_reranked(tmp_path, strategy):
    bench = many_chunks_bench(tmp_path)

    trace = bench.retrieve(VENDOR, AES_CRITERION, strategy)

    assert len(trace.first_stage) == 100
    assert len(trace.reranked) == 70
    assert len({c.id for c in trace.reranked}) == 70
    reranked_ids = {c.id for c in trace.reranked}
    assert reranked_ids <= {c.id for c in trace.first_stage}
    left_out = [c for c in trace.first_stage
                if c.id not in reranked_ids and not c.id.startswith("followup-")]
    assert len(left_out) == 100 - 70 - sum(c.id.startswith("followup-") for c in trace.first_stage)
    worst_reranked = min(c.first_stage_score for c in trace.reranked)
    assert all(c.first_stage_score <= worst_reranked for c in left_out)
    assert len(trace.evidence) == 6
    # precedence fetches the linked answer by metadata; seed 000 has it only if the
    # approximate search returned it (ChromaDB's HNSW can miss even the nearest record).
    searched = any(c.id.startswith("followup-") for c in trace.first_stage)
    found = strategy == "precedence" or searched
    assert [f.answer_text for f in trace.followups] == (["Yes."] if found else [])


@BOTH
def test_at_most_six_excerpts_and_the_contract_json_keys(docs_bench, strategy):
    for rnd in (1, 2):
        docs_bench.ingest_questionnaire(round_payload(rnd, [linked(REWORDED, f"AES {rnd}.")]))

    data = json.loads(json.dumps(docs_bench.retrieve(VENDOR, AES_CRITERION,
                                                     strategy).to_json_dict()))

    for key in ("vendor_id", "criterion", "criterion_hash", "strategy", "reranker", "context",
                "followups", "evidence", "timings_ms"):
        assert key in data
    assert data["vendor_id"] == VENDOR
    assert data["criterion"] == AES_CRITERION
    assert data["criterion_hash"] == criterion_hash(AES_CRITERION)
    assert data["strategy"] == strategy
    assert len(data["evidence"]) == 6
    assert [f["round_number"] for f in data["followups"]] == [1, 2]
    for followup in data["followups"]:
        assert {"id", "round_number", "tier", "hash_match", "question_similarity",
                "criterion_question_text", "question_text", "answer_text"} <= set(followup)
        assert followup["tier"] == "medium"
        assert followup["criterion_question_text"] == AES_CRITERION
    for item in data["evidence"]:
        assert {"id", "type", "source", "text", "first_stage_score", "rerank_score", "boost",
                "final_score", "rank_before_boost", "rank_after_boost"} <= set(item)
        assert item["type"] == "tc_files"
        assert item["boost"] == 1.0
        assert item["rerank_score"] is not None
    assert "total" in data["timings_ms"]
    assert {"first_stage", "rerank"} <= set(data["timings_ms"])
