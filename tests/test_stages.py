"""Retrieval stages on hand-built candidates: seeds 000 (extraction, round cap), 002 (boost)
and 003 (tiers, merge)."""

from __future__ import annotations

import pytest

from core.config import Settings
from core.hashing import criterion_hash, format_embedding_content
from core.models import FOLLOWUP_SOURCE_TYPE, Candidate, FollowupHit, RerankerStatus
from core.retrieval.stages import (
    RetrievalEnv,
    boost_followup_documents,
    rerank,
    select_top,
    top_by_first_stage,
)
from core.retrieval.tiers import assign_tiers, extract_by_hash, keep_latest_rounds, merge_tiers
from tests.conftest import AES_CRITERION
from tests.fakes import FakeReranker

H = criterion_hash(AES_CRITERION)
OTHER_CRITERION = "Does the vendor encrypt data in transit using TLS 1.2 or higher?"
TIERS = Settings(fuzzy_match_threshold=0.7)


def followup_candidate(cid: str, round_number: int, cq_hash: str | None, *,
                       score: float = 0.5) -> Candidate:
    metadata = {"source_type": FOLLOWUP_SOURCE_TYPE, "type": f"followup_response:{round_number}",
                "round_number": round_number, "question_text": "Q?", "answer_text": "A."}
    if cq_hash is not None:
        metadata["criterion_question_hash"] = cq_hash
    return Candidate(id=cid, type=f"followup_response:{round_number}",
                     source=f"Follow-up Questionnaire Round {round_number}",
                     round_number=round_number, text="Question: Q? Answer: A.",
                     first_stage_score=score, final_score=score, metadata=metadata)


def document(cid: str, score: float | None = 0.5, *, doc_type: str = "tc_files",
             first_stage: float | None = None, rank: int | None = None) -> Candidate:
    return Candidate(id=cid, type=doc_type, source=f"{cid}.md", text=f"text of {cid}",
                     first_stage_score=first_stage if first_stage is not None else score,
                     final_score=score, rank_before_boost=rank, rank_after_boost=rank,
                     metadata={"source_type": "document", "type": doc_type})


def hit(hid: str, round_number: int, *, similarity: float = 1.0, hash_match: bool = True,
        found_by: tuple[str, ...] = ("hash",), tier: str | None = None,
        timestamp: str | None = None, criterion: str | None = AES_CRITERION) -> FollowupHit:
    return FollowupHit(
        id=hid, round_number=round_number,
        timestamp=timestamp or f"2024-01-{10 + round_number:02d}T10:30:00Z",
        source=f"Follow-up Questionnaire Round {round_number}",
        content=format_embedding_content("Q?", "A."),
        criterion_question_text=criterion,
        criterion_question_hash=criterion_hash(criterion) if criterion else None,
        question_text="Q?", answer_text="A.", hash_match=hash_match,
        found_by=list(found_by), question_similarity=similarity, tier=tier)


def env(reranker=None, **settings) -> RetrievalEnv:
    return RetrievalEnv(
        settings=Settings(**settings), vendor_id="acme", search=None, records=None,
        reranker=reranker,
        reranker_status=RerankerStatus(name="test", ran=reranker is not None, reason="test"),
        read_links=dict,
    )


# Seed 000: extraction by hash -------------------------------------------------------------

def test_extract_by_hash_separates_linked_followups():
    candidates = [
        document("doc-a", 0.9),
        followup_candidate("fu-linked", 2, H),
        followup_candidate("fu-other", 1, criterion_hash(OTHER_CRITERION)),
        followup_candidate("fu-adhoc", 1, None),
        document("doc-b", 0.4),
        followup_candidate("fu-linked-2", 3, H),
    ]
    matched, remaining = extract_by_hash(candidates, H)
    assert [c.id for c in matched] == ["fu-linked", "fu-linked-2"]
    assert [c.id for c in remaining] == ["doc-a", "fu-other", "fu-adhoc", "doc-b"]


def test_extract_by_hash_with_no_followups_keeps_everything():
    candidates = [document("doc-a"), document("doc-b")]
    matched, remaining = extract_by_hash(candidates, H)
    assert matched == []
    assert [c.id for c in remaining] == ["doc-a", "doc-b"]


def test_extract_by_hash_ignores_documents_carrying_a_hash_key():
    doc = document("doc-a")
    doc = doc.model_copy(update={"metadata": {**doc.metadata, "criterion_question_hash": H}})
    matched, remaining = extract_by_hash([doc], H)
    assert matched == []
    assert [c.id for c in remaining] == ["doc-a"]


def test_extract_by_hash_does_not_mutate_input():
    candidates = [followup_candidate("fu", 1, H), document("doc")]
    extract_by_hash(candidates, H)
    assert [c.id for c in candidates] == ["fu", "doc"]


# Seed 000: round cap ----------------------------------------------------------------------

def test_five_rounds_keep_5_4_3():
    hits = [hit(f"r{n}", n) for n in (2, 5, 1, 4, 3)]
    kept, dropped = keep_latest_rounds(hits, 3)
    assert [h.round_number for h in kept] == [5, 4, 3]
    assert sorted(d.followup.round_number for d in dropped) == [1, 2]
    for d in dropped:
        assert "MAX_FOLLOWUP_ROUNDS=3" in d.reason
        assert f"round {d.followup.round_number}" in d.reason


def test_three_rounds_or_fewer_drop_nothing():
    kept, dropped = keep_latest_rounds([hit("r1", 1), hit("r3", 3), hit("r2", 2)], 3)
    assert [h.round_number for h in kept] == [3, 2, 1]
    assert dropped == []


def test_round_cap_is_configurable():
    kept, dropped = keep_latest_rounds([hit(f"r{n}", n) for n in range(1, 6)], 1)
    assert [h.round_number for h in kept] == [5]
    assert len(dropped) == 4


# Seed 003: tiers --------------------------------------------------------------------------

def test_hash_match_with_similar_question_is_high():
    [tiered] = assign_tiers([hit("a", 2, similarity=0.93)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "high"
    assert tiered.tier_reason == (
        "hash match; question lightly edited, similarity 0.93 >= 0.70: high")


def test_unchanged_question_is_high():
    [tiered] = assign_tiers([hit("a", 2, similarity=1.0)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "high"
    assert tiered.tier_reason == "hash match; question unchanged, similarity 1.00 >= 0.70: high"


def test_similarity_exactly_at_threshold_is_high():
    [tiered] = assign_tiers([hit("a", 2, similarity=0.7)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "high"


def test_hash_match_with_reworded_question_is_medium():
    [tiered] = assign_tiers([hit("a", 2, similarity=0.42)], [], AES_CRITERION, TIERS)
    assert tiered.tier == "medium"
    assert tiered.tier_reason == "hash match; question reworded, similarity 0.42 < 0.70: medium"


def test_semantic_only_is_low():
    semantic = hit("b", 1, hash_match=False, found_by=("semantic",), criterion=OTHER_CRITERION)
    [tiered] = assign_tiers([], [semantic], AES_CRITERION, TIERS)
    assert tiered.tier == "low"
    assert tiered.tier_reason.startswith("no hash match")
    assert tiered.tier_reason.endswith(": low")


def test_ad_hoc_semantic_hit_is_low_and_says_ad_hoc():
    adhoc = hit("c", 1, hash_match=False, found_by=("semantic",), criterion=None)
    [tiered] = assign_tiers([], [adhoc], AES_CRITERION, TIERS)
    assert tiered.tier == "low"
    assert "ad-hoc" in tiered.tier_reason


def test_hit_found_by_both_paths_appears_once_in_its_hash_tier():
    by_hash = hit("same", 2, similarity=0.95, found_by=("hash",))
    by_semantic = hit("same", 2, similarity=0.95, found_by=("semantic",))
    other = hit("other", 1, hash_match=False, found_by=("semantic",), criterion=OTHER_CRITERION)
    tiered = assign_tiers([by_hash], [by_semantic, other], AES_CRITERION, TIERS)
    assert [h.id for h in tiered] == ["same", "other"]
    assert tiered[0].tier == "high"
    assert tiered[0].found_by == ["hash", "semantic"]
    assert tiered[1].tier == "low"


def test_assign_tiers_does_not_mutate_input():
    original = hit("a", 2, similarity=0.42)
    assign_tiers([original], [], AES_CRITERION, TIERS)
    assert original.tier is None
    assert original.tier_reason == ""


# Seed 003: merge --------------------------------------------------------------------------

def test_merge_orders_high_medium_low_newest_first_and_caps():
    hits = [
        hit("low-6", 6, tier="low"),
        hit("high-1", 1, tier="high"),
        hit("medium-5", 5, tier="medium"),
        hit("high-3", 3, tier="high"),
        hit("medium-4", 4, tier="medium"),
    ]
    kept, dropped = merge_tiers(hits, 3)
    assert [h.id for h in kept] == ["high-3", "high-1", "medium-5"]
    assert sorted(d.followup.id for d in dropped) == ["low-6", "medium-4"]
    for d in dropped:
        assert "MAX_FOLLOWUP_ROUNDS" in d.reason


def test_merge_same_round_newest_timestamp_first():
    hits = [hit("early", 2, tier="high", timestamp="2024-01-15T08:00:00Z"),
            hit("late", 2, tier="high", timestamp="2024-01-15T18:00:00Z")]
    kept, _ = merge_tiers(hits, 3)
    assert [h.id for h in kept] == ["late", "early"]


def test_merge_under_limit_keeps_all():
    kept, dropped = merge_tiers([hit("a", 1, tier="low"), hit("b", 2, tier="medium")], 3)
    assert [h.id for h in kept] == ["b", "a"]
    assert dropped == []


# Seed 002: follow-up document boost -------------------------------------------------------

def _ids(candidates):
    return [c.id for c in candidates]


def test_boost_multiplies_only_followup_documents():
    result = boost_followup_documents(
        [document("orig", 0.6), document("fu", 0.5, doc_type="followup_document")], 1.15, 1.0)
    by_id = {c.id: c for c in result}
    assert by_id["fu"].final_score == pytest.approx(0.575)
    assert by_id["fu"].boost == pytest.approx(1.15)
    assert by_id["orig"].final_score == 0.6
    assert by_id["orig"].boost == 1.0


def test_boost_resorts_by_boosted_score():
    result = boost_followup_documents([
        document("a", 0.62), document("fu", 0.56, doc_type="followup_document"),
        document("b", 0.60), document("c", 0.10),
    ], 1.15, 1.0)
    assert _ids(result) == ["fu", "a", "b", "c"]
    assert [c.rank_after_boost for c in result] == [1, 2, 3, 4]


@pytest.mark.parametrize("doc_type", ["tc_files", "followup_response:1",
                                      "soc2_summary:overview", "followup_documents", ""])
def test_other_types_are_not_boosted(doc_type):
    [result] = boost_followup_documents([document("x", 0.5, doc_type=doc_type)], 1.15, 1.0)
    assert result.final_score == 0.5
    assert result.boost == 1.0


def test_boost_of_empty_list_is_empty():
    assert boost_followup_documents([], 1.15, 1.0) == []


def test_boost_when_all_are_followup_documents():
    result = boost_followup_documents([
        document("a", 0.4, doc_type="followup_document"),
        document("b", 0.8, doc_type="followup_document"),
        document("c", 0.6, doc_type="followup_document"),
    ], 1.15, 1.0)
    assert _ids(result) == ["b", "c", "a"]
    assert [c.final_score for c in result] == pytest.approx([0.92, 0.69, 0.46])
    assert all(c.boost == pytest.approx(1.15) for c in result)


def test_boost_when_none_are_followup_documents():
    given = [document("a", 0.9, rank=1), document("b", 0.5, rank=2), document("c", 0.1, rank=3)]
    result = boost_followup_documents(given, 1.15, 1.0)
    assert _ids(result) == ["a", "b", "c"]
    assert [c.final_score for c in result] == [0.9, 0.5, 0.1]
    assert [c.boost for c in result] == [1.0, 1.0, 1.0]
    assert [(c.rank_before_boost, c.rank_after_boost) for c in result] == [(1, 1), (2, 2), (3, 3)]


def test_close_followup_document_beats_original():
    result = boost_followup_documents(
        [document("orig", 0.8), document("fu", 0.7, doc_type="followup_document")], 1.15, 1.0)
    assert _ids(result) == ["fu", "orig"]
    assert result[0].final_score == pytest.approx(0.805)


def test_much_less_relevant_followup_document_stays_below():
    result = boost_followup_documents(
        [document("fu", 0.3, doc_type="followup_document"), document("orig", 0.5)], 1.15, 1.0)
    assert _ids(result) == ["orig", "fu"]
    assert result[1].final_score == pytest.approx(0.345)


def test_boost_is_capped_at_one():
    [result] = boost_followup_documents(
        [document("fu", 0.95, doc_type="followup_document")], 1.15, Settings().followup_boost_cap)
    assert Settings().followup_boost_cap == 1.0
    assert result.final_score == pytest.approx(1.0)
    assert result.boost == pytest.approx(1.0 / 0.95, abs=1e-6)


def test_cap_never_lowers_a_score():
    [at_cap] = boost_followup_documents([document("a", 1.0, doc_type="followup_document")],
                                        1.15, 1.0)
    assert at_cap.final_score == 1.0
    [above_cap] = boost_followup_documents([document("b", 0.95, doc_type="followup_document")],
                                           1.15, 0.9)
    assert above_cap.final_score == 0.95
    assert above_cap.boost == 1.0


def test_no_cap_lets_boost_exceed_one():
    [result] = boost_followup_documents([document("fu", 0.95, doc_type="followup_document")],
                                        1.15, None)
    assert result.final_score == pytest.approx(1.0925)


def test_ranks_before_and_after_boost_record_the_move():
    given = [document("orig", 0.8, rank=1),
             document("fu", 0.7, doc_type="followup_document", rank=2),
             document("third", 0.2, rank=3)]
    result = boost_followup_documents(given, 1.15, 1.0)
    assert [(c.id, c.rank_before_boost, c.rank_after_boost) for c in result] == [
        ("fu", 2, 1), ("orig", 1, 2), ("third", 3, 3)]


def test_boost_does_not_mutate_input():
    given = [document("orig", 0.8, rank=1),
             document("fu", 0.7, doc_type="followup_document", rank=2)]
    boost_followup_documents(given, 1.15, 1.0)
    assert [(c.id, c.final_score, c.boost, c.rank_after_boost) for c in given] == [
        ("orig", 0.8, 1.0, 1), ("fu", 0.7, 1.0, 2)]


# First stage cut and final selection ------------------------------------------------------

def test_top_by_first_stage_takes_best_n():
    candidates = [document("a", first_stage=0.2), document("b", first_stage=0.9),
                  document("c", first_stage=0.5), document("d", first_stage=0.7)]
    assert _ids(top_by_first_stage(candidates, 2)) == ["b", "d"]
    assert _ids(top_by_first_stage(candidates, 10)) == ["b", "d", "c", "a"]


def test_rerank_orders_by_reranker_and_records_ranks():
    candidates = [document("a", first_stage=0.9), document("b", first_stage=0.5)]
    candidates[0] = candidates[0].model_copy(update={"text": "badges visitors"})
    candidates[1] = candidates[1].model_copy(update={"text": "vendor encrypts data AES-256"})
    ranked = rerank(env(FakeReranker()), AES_CRITERION, candidates)
    assert _ids(ranked) == ["b", "a"]
    assert ranked[1].rerank_score == 0.0
    assert ranked[0].rerank_score == ranked[0].final_score > 0
    assert [(c.rank_before_boost, c.rank_after_boost) for c in ranked] == [(1, 1), (2, 2)]


def test_rerank_without_reranker_keeps_first_stage_order():
    candidates = [document("a", first_stage=0.9), document("b", first_stage=0.5)]
    ranked = rerank(env(None), AES_CRITERION, candidates)
    assert _ids(ranked) == ["a", "b"]
    assert [c.rerank_score for c in ranked] == [None, None]
    assert [c.final_score for c in ranked] == [0.9, 0.5]


def test_select_top_applies_cutoff_when_reranker_ran():
    e = env(FakeReranker(), relevancy_cutoff=0.3)
    ranked = [document("a", 0.9), document("b", 0.31), document("c", 0.29), document("d", 0.0)]
    assert _ids(select_top(e, ranked, 6)) == ["a", "b"]
    assert any("cutoff" in note for note in e.notes)


def test_select_top_takes_top_n_before_cutoff():
    e = env(FakeReranker())
    ranked = [document(f"d{n}", 0.9 - n * 0.1) for n in range(8)]
    assert _ids(select_top(e, ranked, 6)) == [f"d{n}" for n in range(6)]


def test_select_top_without_reranker_ignores_cutoff():
    e = env(None, relevancy_cutoff=0.3)
    ranked = [document("a", 0.2), document("b", 0.005), document("c", -0.1)]
    assert _ids(select_top(e, ranked, 6)) == ["a", "b", "c"]
    assert e.notes == []
