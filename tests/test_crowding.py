"""The central claim: thousands of policy chunks that look like the criterion crowd terse,
reworded follow-up answers out of any top-100 search. `hash_extraction` (seed 000, a
post-filter of the first 100) loses them; `precedence` (a metadata lookup) finds every one.

The follow-ups share no word with either criterion, so under the fake bag-of-words embedder
they are far below every policy chunk; both outcomes are asserted, so the test fails if
either strategy changes."""

from __future__ import annotations

import pytest

from core.config import Settings
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker, words
from tests.support import payloads

VENDOR = "acme"
KEYS_CRITERION = "Is data at rest encrypted by the vendor using AES-256 keys?"
AES_QUESTION = "Which cipher protects stored customer information?"
KEYS_QUESTION = "Who holds the master secret?"
AES_ANSWERS = {1: "Planned.", 2: "Partly.", 3: "Mostly.", 4: "Nearly.", 5: "Yes."}
KEYS_ANSWERS = {2: "Our HSM group.", 5: "Two officers jointly."}
PER_FILE = 500


def paragraph(i: int) -> str:
    """A policy-like chunk (120-200 characters) holding nearly every criterion word."""
    return (f"Control {i}: the vendor must encrypt data at rest using AES-256 keys; encrypted "
            f"volume vol{i} in zone{i % 17} is reviewed by unit{i % 29} each cycle{i % 7}.")


def build_store(root, chunks: int) -> Workbench:
    settings = Settings(store=root / "store", reranker_cache_dir=root / "models",
                        chunk_size=200, chunk_overlap=0)
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    folder = root / "policies"
    folder.mkdir()
    for start in range(0, chunks, PER_FILE):
        text = "\n\n".join(paragraph(i) for i in range(start, min(start + PER_FILE, chunks)))
        (folder / f"policy_{start // PER_FILE:02d}.md").write_text(text + "\n", encoding="utf-8")
    report = bench.ingest_documents(VENDOR, [folder])
    assert report.chunks_written == chunks
    for rnd in range(1, 6):
        responses = [payloads.response(AES_QUESTION, AES_ANSWERS[rnd], AES_CRITERION)]
        if rnd in KEYS_ANSWERS:
            responses.append(payloads.response(KEYS_QUESTION, KEYS_ANSWERS[rnd], KEYS_CRITERION))
        bench.ingest_questionnaire(payloads.round_payload(rnd, responses, vendor=VENDOR))
    return bench


@pytest.fixture(scope="module", params=[500, 3000], ids=["500-chunks", "3000-chunks"])
def crowded(request, tmp_path_factory) -> Workbench:
    bench = build_store(tmp_path_factory.mktemp(f"crowded{request.param}"), request.param)
    [status] = bench.status(VENDOR)
    assert (status.chunks, status.followup_responses) == (request.param, 7)
    return bench


def test_the_followups_share_no_word_with_the_criteria():
    followup_words = set(words(f"Question: {AES_QUESTION} Answer: {' '.join(AES_ANSWERS.values())}"
                               f" {KEYS_QUESTION} {' '.join(KEYS_ANSWERS.values())}"))
    assert followup_words.isdisjoint(words(AES_CRITERION))
    assert followup_words.isdisjoint(words(KEYS_CRITERION))
    assert followup_words.isdisjoint(words(paragraph(1234)))


@pytest.mark.parametrize(("criterion", "answers", "kept"), [
    (AES_CRITERION, AES_ANSWERS, [3, 4, 5]),
    (KEYS_CRITERION, KEYS_ANSWERS, [2, 5]),
], ids=["five-rounds", "two-rounds"])
def test_precedence_returns_every_linked_followup_at_any_size(crowded, criterion, answers,
                                                               kept):
    trace = crowded.retrieve(VENDOR, criterion, "precedence")

    assert [f.round_number for f in trace.followups] == kept
    assert [f.answer_text for f in trace.followups] == [answers[r] for r in kept]
    for hit in trace.followups:
        assert hit.hash_match is True
        assert hit.tier == "medium"  # the question was reworded
        assert hit.found_by == ["hash"]  # no search would have found it
    assert sorted(d.followup.round_number for d in trace.dropped_followups) == sorted(
        set(answers) - set(kept))
    # Crowded out for real: every linked answer scores below the 100th policy chunk.
    assert len(trace.first_stage) == 100
    assert all(c.type == "tc_files" for c in trace.first_stage)
    floor = min(c.first_stage_score for c in trace.first_stage)
    assert all(h.first_stage_score < floor for h in trace.hash_path)
    entry = trace.context.rsplit("<index_", 1)[1]
    assert entry.startswith(f"{len(trace.evidence) + 1}>")
    for rnd in kept:
        assert f"Answer: {answers[rnd]}" in entry
    assert len(trace.evidence) == 6


@pytest.mark.parametrize("criterion", [AES_CRITERION, KEYS_CRITERION])
def test_hash_extraction_loses_them_in_the_crowd(crowded, criterion):
    trace = crowded.retrieve(VENDOR, criterion, "hash_extraction")

    assert trace.followups == []
    assert trace.hash_path == []
    assert len(trace.first_stage) == 100
    assert not [c for c in trace.first_stage if c.id.startswith("followup-")]
    assert "Follow-up Questionnaire" not in trace.context
    assert len(trace.evidence) == 6


def test_semantic_strategy_loses_them_too(crowded):
    trace = crowded.retrieve(VENDOR, AES_CRITERION, "semantic")

    assert not [c for c in trace.first_stage if c.id.startswith("followup-")]
    assert "Follow-up Questionnaire" not in trace.context
