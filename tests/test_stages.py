"""Generic retrieval stages on hand-built candidates: seed 002 (the follow-up document
boost), the first stage cut, the rerank and the final selection."""

from __future__ import annotations

import pytest

from core.config import Settings
from core.models import RerankerStatus
from core.retrieval.stages import (
    RetrievalEnv,
    boost_followup_documents,
    rerank,
    select_top,
    top_by_first_stage,
)
from tests.conftest import AES_CRITERION
from tests.fakes import FakeReranker
from tests.support.candidates import document


def env(reranker=None, **settings) -> RetrievalEnv:
    return RetrievalEnv(
        settings=Settings(**settings), vendor_id="acme", search=None, records=None,
        reranker=reranker,
        reranker_status=RerankerStatus(name="test", ran=reranker is not None, reason="test"),
        read_links=dict,
    )


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
